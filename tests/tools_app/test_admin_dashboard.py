"""The admin index is the current tenant's dashboard: health, approvals, 24 h of calls, market sources."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from market_app.models import MarketEntry, MarketSource
from tests.factories import ToolFactory
from tests.tenants_app.test_admin_tenant_context import admin_client
from tools_app import dashboard
from tools_app.models import CallStatus, Tool, ToolCall, ToolStatus, ToolType

pytestmark = pytest.mark.django_db


def calls(tenant: Any, tool: Any, costs: list[int], status: str = CallStatus.OK, hours_ago: float = 1) -> None:
    at = timezone.now() - timedelta(hours=hours_ago)
    ToolCall.objects.bulk_create([ToolCall(tenant=tenant, tool=tool, tool_name=tool.name, function="f", status=status,
                                           cost_ms=c, created_at=at) for c in costs])


def test_health_buckets(tenant: Any) -> None:
    builtins = Tool.objects.filter(tenant=tenant, type=ToolType.BUILTIN)  # a new tenant's, some start disabled
    builtins_off = builtins.filter(status=ToolStatus.DISABLED).count()
    builtins_on = builtins.count() - builtins_off
    now = timezone.now()
    ToolFactory(tenant=tenant, name="fine", last_ok_at=now)
    ToolFactory(tenant=tenant, name="flaky", last_ok_at=now, consecutive_failures=2, last_error="refused")
    ToolFactory(tenant=tenant, name="tripped", consecutive_failures=3, disabled_until=now + timedelta(minutes=4))
    ToolFactory(tenant=tenant, name="fresh")
    ToolFactory(tenant=tenant, name="off", status="DISABLED")
    health = dashboard.tool_health(tenant=tenant, now=now)
    assert (health.ok, health.failing, health.paused, health.never_checked, health.disabled) == (1, 1, 1, 1,
                                                                                                 1 + builtins_off)
    assert [t.name for t, _ in health.paused_tools] == ["tripped"]
    assert 230 < health.paused_tools[0][1].total_seconds() <= 240
    assert health.unchecked_types == builtins_on > 0


def test_activity_percentiles_and_hours(tenant: Any) -> None:
    a = ToolFactory(tenant=tenant, name="a")
    b = ToolFactory(tenant=tenant, name="b")
    calls(tenant, a, list(range(1, 101)))
    calls(tenant, a, [500, 500], status=CallStatus.ERROR, hours_ago=3)
    calls(tenant, b, [7])
    calls(tenant, b, [9999], hours_ago=30)  # older than 24 h: left out
    activity = dashboard.call_activity(tenant=tenant)
    assert (activity.calls, activity.errors) == (103, 2)
    rows = {t.tool: t for t in activity.tools}
    assert (rows["a"].calls, rows["a"].errors, rows["a"].p50_ms, rows["a"].p95_ms) == (102, 2, 51, 97)
    assert (rows["b"].p50_ms, rows["b"].p95_ms) == (7, 7)
    assert len(activity.hours) == 24 and sum(h[1] for h in activity.hours) == 103
    assert [h[2] for h in activity.hours if h[2]] == [2]


def test_held_and_denied_calls_do_not_count_as_0_ms_and_rows_link_to_the_calls(tenant: Any) -> None:
    slow = ToolFactory(tenant=tenant, name="slow")
    calls(tenant, slow, [200, 200, 200])
    calls(tenant, slow, [0, 0, 0, 0], status=CallStatus.AWAITING_APPROVAL)
    calls(tenant, slow, [0, 0], status=CallStatus.DENIED)
    row = next(t for t in dashboard.call_activity(tenant=tenant).tools if t.tool == "slow")
    assert (row.calls, row.p50_ms, row.p95_ms) == (9, 200, 200)  # they still count as calls, not as cost
    page = admin_client(tenant).get("/admin/").content.decode()
    assert f'<a href="/admin/tools_app/toolcall/?tool__id__exact={slow.pk}">slow</a>' in page


def test_index_shows_every_panel_with_a_bounded_number_of_queries(tenant: Any, other_tenant: Any) -> None:
    client = admin_client(tenant)
    client.get("/admin/")  # warm the session's tenant

    def count() -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert client.get("/admin/").status_code == 200
        return len(ctx.captured_queries)

    def add(i: int) -> None:
        tool = ToolFactory(tenant=tenant, name=f"t{i}", consecutive_failures=i % 3)
        calls(tenant, tool, [i, i + 1, i + 2])
        source = MarketSource.objects.create(tenant=tenant, name=f"src{i}", url="http://127.0.0.1:9/c.json")
        entry = MarketEntry.objects.create(source=source, name=f"e{i}", content_hash="new")
        tool.market_entry, tool.market_hash = entry, "old"
        tool.save()

    add(0)
    small = count()
    assert small <= 20
    for i in range(1, 30):
        add(i)
    assert count() == small
    page = client.get("/admin/").content.decode()
    for panel in ("panel-health", "panel-approvals", "panel-activity", "panel-market", "calls-chart"):
        assert f'id="{panel}"' in page
    assert "1 available" in page and "src0" in page


def test_dashboard_counts_never_include_another_tenant(tenant: Any, other_tenant: Any) -> None:
    theirs = ToolFactory(tenant=other_tenant, name="omega", consecutive_failures=3,
                         disabled_until=timezone.now() + timedelta(minutes=5))
    calls(other_tenant, theirs, [1, 2, 3], status=CallStatus.ERROR)
    MarketSource.objects.create(tenant=other_tenant, name="omega-source", url="http://127.0.0.1:9/c.json")
    page = admin_client(tenant).get("/admin/").content.decode()
    assert "omega" not in page
    health = page[page.index('id="panel-health"'):page.index('id="panel-approvals"')]
    assert '<span class="big">0</span><span class="toolhub-badge bad">paused' in health
    activity = page[page.index('id="panel-activity"'):]
    assert '<span class="big">0</span>calls' in activity
