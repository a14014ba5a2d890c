"""The reference servers (issue 41) loaded in one click from an official-registry record pass Test in the default
sandbox (no network) and answer a call, run from the test package store (the README way: test_reference_servers.py).
Added with other package runners than their READMEs name: test_reference_runners.py, a module of its own only so that
a parallel run spreads the two over two workers (together they kept one worker over 60 s; they share nothing but the
prepared store)."""

from __future__ import annotations

from typing import Any

import pytest

from market_app import services as market
from market_app.models import MarketEntry, MarketSource
from tests.fixtures.catalog_server import Registry
from tests.market_app.test_package_entries import record
from tests.market_app.test_registry_excerpt import fetched
from tests.tools_app.packages.reference import BY_KEY, REFERENCE, fill
from tests.tools_app.packages.reference_api import (
    MARKS,
    _close_pool,
    _prepared,
    _store,
    passes_test_and_answers,
    reachable,
)
from tools_app.wiring.workspaces import workspace_for

pytestmark = MARKS
__all__ = ["_close_pool", "_prepared", "_store"]  # the fixtures, used by name


@pytest.mark.parametrize("key", [r.key for r in REFERENCE])
def test_loaded_in_one_click_from_the_official_registry_it_passes_test_and_answers(api: Any, tenant: Any,
                                                                                  key: str) -> None:
    ref = BY_KEY[key]
    reachable(ref)
    workspace = workspace_for(tenant)
    item = record(f"io.github.modelcontextprotocol/{ref.package.rsplit('/', 1)[-1]}", ref.manager, ref.package,
                  ref.version)
    if ref.package_arguments:
        item["server"]["packages"][0]["packageArguments"] = list(ref.package_arguments)
    source = MarketSource.objects.create(tenant=tenant, name="official", url="http://127.0.0.1:9/")
    market.source_apply_catalog(source_id=source.pk, fetched=fetched(Registry([item])))
    entry = MarketEntry.objects.get(source=source)
    assert entry.install["command"] == ("npx" if ref.manager == "npm" else "uvx")
    body = {"env": {name: fill(value, workspace) for name, value in ref.load_env}} if ref.load_env else {}
    loaded = api.post(f"/api/v1/market/entries/{entry.pk}/load/", body, format="json")
    assert loaded.status_code in (200, 201), loaded.content
    tool_id = loaded.json()["tool"]["id"]
    package = passes_test_and_answers(api, tool_id, ref, workspace)
    assert package["version"] == ref.version and package["requested"] in (ref.version, f"=={ref.version}"), package

