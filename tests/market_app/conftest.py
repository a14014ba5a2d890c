"""Market fixtures: a loopback catalog server, sources and an admin client per tenant."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.fixtures.catalog_server import CatalogServer
from tests.market_app.factories import EntryFactory, SourceFactory


@pytest.fixture
def server() -> Iterator[CatalogServer]:
    with CatalogServer() as srv:
        yield srv


@pytest.fixture
def source_factory(db: Any) -> type[SourceFactory]:
    return SourceFactory


@pytest.fixture
def entry_factory(db: Any) -> type[EntryFactory]:
    return EntryFactory


@pytest.fixture(autouse=True)
def _fast_market(settings: Any) -> None:
    """Short timeouts keep the hanging-server test quick; the size cap stays at its default."""
    settings.TOOLHUB_MARKET_TIMEOUT_S = 2.0
