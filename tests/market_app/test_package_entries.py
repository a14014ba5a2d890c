"""Official-registry npm and PyPI entries loaded in one click become LOCAL tools that install their package into the
store and pass Test in the default sandbox (issue 41). Real registries: marked real_servers, skipped when unreachable.

The records have the excerpt's shape (tests/fixtures/catalogs/registry_excerpt.json); the servers are the reference
ones (server-everything, mcp-server-time), which start with no arguments, no secrets and no network."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from market_app import services
from market_app.models import MarketEntry, MarketSource
from tests.fixtures import real_servers as rs
from tests.fixtures.catalog_server import Registry
from tests.market_app.test_registry_excerpt import fetched
from tools_app.wiring.pool import pool

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.real_servers]
EXCERPT = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "catalogs" /
                      "registry_excerpt.json").read_text())


def record(name: str, registry_type: str, identifier: str, version: str) -> dict[str, Any]:
    """An excerpt record (npm, stdio) re-pointed at another package."""
    base = next(i for i in EXCERPT["servers"] if i["server"]["name"] == "io.github.oguzc/playwright-wizard-mcp")
    item = copy.deepcopy(base)
    item["server"].update({"name": name, "version": version, "description": f"{identifier} from the registry"})
    item["server"]["packages"] = [{"registryType": registry_type, "identifier": identifier, "version": version,
                                   "transport": {"type": "stdio"}}]
    return item


@pytest.fixture(autouse=True)
def _close_pool() -> Any:
    yield
    pool().close_all()


@pytest.mark.parametrize(("registry_type", "identifier", "version", "command"), [
    ("npm", "@modelcontextprotocol/server-everything", "2026.8.31", "npx"),
    ("pypi", "mcp-server-time", "2026.10.19", "uvx"),
])
def test_loaded_package_entry_installs_and_passes_test(api: Any, tenant: Any, registry_type: str, identifier: str,
                                                       version: str, command: str) -> None:
    rs.require("npm" if registry_type == "npm" else "py")
    source = MarketSource.objects.create(tenant=tenant, name="official", url="http://127.0.0.1:9/")
    services.source_apply_catalog(source_id=source.pk, fetched=fetched(Registry([
        record(f"io.github.modelcontextprotocol/{identifier.rsplit('/', 1)[-1]}", registry_type, identifier, version),
    ])))
    entry = MarketEntry.objects.get(source=source)
    assert entry.install["command"] == command
    loaded = api.post(f"/api/v1/market/entries/{entry.pk}/load/", {}, format="json")
    assert loaded.status_code in (200, 201), loaded.content
    tool_id = loaded.json()["tool"]["id"]
    tested = api.post(f"/api/v1/tools/{tool_id}/test/").json()
    assert tested["ok"] and tested["tool_count"] > 0, tested
    package = api.get(f"/api/v1/tools/{tool_id}/").json()["package"]
    assert (package["name"], package["version"], package["status"]) == (identifier, version, "installed"), package
