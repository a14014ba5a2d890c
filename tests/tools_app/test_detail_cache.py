"""GET /tools/{id}/ warm from process memory: no query for a plain tool, and every kind of change (API, health,
discovery, another process, the market catalog) shows on the very next request."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.cache import cache

from core import hotcache
from market_app.models import EntryKind, MarketEntry, MarketSource
from tests.factories import ToolFactory
from tools_app.models import FunctionState, Tool, ToolFunction
from tools_app.services import breaker
from tools_app.services.discovery import store_functions

pytestmark = pytest.mark.django_db


@pytest.fixture
def tool(tenant: Any) -> Tool:
    tool = ToolFactory(tenant=tenant, description="first")
    ToolFunction.objects.create(tool=tool, name="lookup", description="d", input_schema={"type": "object"},
                                state=FunctionState.ACTIVE)
    return tool


def detail(api: Any, tool_id: int) -> dict[str, Any]:
    resp = api.get(f"/api/v1/tools/{tool_id}/")
    assert resp.status_code == 200, resp.content
    return dict(resp.json())


def test_a_warm_detail_reads_no_database_and_answers_the_same(api: Any, tool: Tool,
                                                               django_assert_num_queries: Any) -> None:
    cold = detail(api, tool.pk)
    with django_assert_num_queries(0):
        warm = detail(api, tool.pk)
    assert warm == cold
    assert warm["config_summary"]["headers"] == {"X-Api-Key": "********"}  # masked, cached or not
    assert "factory-secret" not in str(warm) and [f["name"] for f in warm["functions"]] == ["lookup"]


def test_changes_through_the_api_show_on_the_next_request(api: Any, tool: Tool) -> None:
    detail(api, tool.pk)
    assert api.patch(f"/api/v1/tools/{tool.pk}/", {"description": "second"}, format="json").status_code == 200
    assert detail(api, tool.pk)["description"] == "second"
    resp = api.patch(f"/api/v1/tools/{tool.pk}/functions/lookup/", {"enabled": False}, format="json")
    assert resp.status_code == 200, resp.content
    assert detail(api, tool.pk)["functions"][0]["enabled"] is False
    assert api.delete(f"/api/v1/tools/{tool.pk}/").status_code == 204
    assert api.get(f"/api/v1/tools/{tool.pk}/").status_code == 404


def test_health_and_discovery_writes_show_on_the_next_request(api: Any, tool: Tool) -> None:
    assert detail(api, tool.pk)["consecutive_failures"] == 0
    breaker.record_outcome(tool_id=tool.pk, ok=False, error="connection refused")  # bulk update, no signal
    failed = detail(api, tool.pk)
    assert failed["consecutive_failures"] == 1 and failed["last_error"] == "connection refused"
    bare = ToolFactory(tenant=tool.tenant)
    assert detail(api, bare.pk)["last_checked_at"] is None
    # A rediscovery that saves no function still stamps last_checked_at (a bulk update too).
    store_functions(tool=bare, offered=[])
    assert detail(api, bare.pk)["last_checked_at"] is not None


def test_a_change_made_by_another_process_shows_once_it_bumps_the_tenant(api: Any, tool: Tool, tenant: Any) -> None:
    detail(api, tool.pk)
    Tool.objects.filter(pk=tool.pk).update(description="from elsewhere")  # no signal in this process
    cache.incr("toolhub:gen:" + hotcache.tenant_scope(tenant.pk))  # what the other process's signal does
    assert detail(api, tool.pk)["description"] == "from elsewhere"


def test_another_tenants_tool_is_the_same_404_as_a_missing_one(api: Any, other_api: Any, tool: Tool) -> None:
    detail(api, tool.pk)  # warm in this process
    foreign = other_api.get(f"/api/v1/tools/{tool.pk}/")
    missing = other_api.get("/api/v1/tools/999999/")
    assert foreign.status_code == missing.status_code == 404 and foreign.json() == missing.json()


def test_the_market_block_follows_the_catalog_without_a_tenant_change(api: Any, tenant: Any, tool: Tool) -> None:
    source = MarketSource.objects.create(tenant=tenant, name="Cat", url="http://127.0.0.1:9/c.json")
    entry = MarketEntry.objects.create(source=source, name="io.example/x", kind=EntryKind.REMOTE, content_hash="v1")
    Tool.objects.filter(pk=tool.pk).update(market_entry=entry, market_hash="v1")
    hotcache.bump_tenant(tenant.pk)
    assert detail(api, tool.pk)["market"]["update_available"] is False
    MarketEntry.objects.filter(pk=entry.pk).update(content_hash="v2")  # a catalog refresh (bulk)
    market = detail(api, tool.pk)["market"]
    assert market["update_available"] is True and market["loaded_hash"] == "v1"
