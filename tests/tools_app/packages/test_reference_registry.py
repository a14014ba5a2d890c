"""The reference servers (issue 41) loaded in one click from an official-registry record, and added with other
package runners than their READMEs name, pass Test in the default sandbox (no network) and answer a call, run from
the test package store (the README way: test_reference_servers.py)."""

from __future__ import annotations

from pathlib import Path
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
    create,
    passes_test_and_answers,
    reachable,
)
from tools_app.models import Tool
from tools_app.runtime.mcp.spec import LocalSpec
from tools_app.wiring.specs import server_spec
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


@pytest.mark.parametrize(("argv", "key"), [
    (["pipx", "run", "mcp-server-time"], "time"),
    (["npm", "exec", "--yes", "--", "@modelcontextprotocol/server-everything"], "everything"),
    (["bunx", "@modelcontextprotocol/server-everything"], "everything"),
])
def test_other_package_runners_install_the_same_way(api: Any, tenant: Any, argv: list[str], key: str) -> None:
    """`pipx run`, `npm exec` and `bunx` name their package like `uvx` and `npx`: the runner itself never runs (none
    of them need be installed here), the package is installed into the store and run from there."""
    ref = BY_KEY[key]
    reachable(ref)
    tool_id = create(api, f"{key}-{argv[0]}", argv)
    package = passes_test_and_answers(api, tool_id, ref, workspace_for(tenant))
    assert package["status"] == "installed"
    target = server_spec(Tool.objects.get(pk=tool_id)).target
    assert isinstance(target, LocalSpec) and Path(target.command).name not in ("pipx", "npm", "bunx")
