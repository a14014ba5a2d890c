"""factory-boy factories for market sources and entries."""

from __future__ import annotations

import factory

from market_app.catalog import EntryData
from market_app.models import MarketEntry, MarketSource
from tests.factories import ModelFactory


class SourceFactory(ModelFactory[MarketSource]):
    class Meta:
        model = MarketSource

    tenant = None
    name = factory.Sequence(lambda n: f"source{n}")
    url = "http://127.0.0.1:9/catalog.json"
    format = "auto"


def _hash(o: object) -> str:
    install = o.install  # type: ignore[attr-defined]
    return EntryData.build(name=o.name, kind=o.kind, install=install).content_hash  # type: ignore[attr-defined]


class EntryFactory(ModelFactory[MarketEntry]):
    class Meta:
        model = MarketEntry

    source = factory.SubFactory(SourceFactory)
    name = factory.Sequence(lambda n: f"entry-{n}")
    title = factory.LazyAttribute(lambda o: o.name)
    kind = "LOCAL"
    install = factory.LazyFunction(lambda: {"command": "npx", "args": ["-y", "pkg"], "env": {}})
    content_hash = factory.LazyAttribute(_hash)
