"""The tools and tool-call lists through Django's test client (the Chromium test measures widths): health badges
as on the dashboard, MCP tools before built-ins, tool calls filtered by tool, agent, via and date, with a via
column."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from tests.tools_app.test_admin_lists_browser import stocked
from tools_app.models import ToolCall

pytestmark = pytest.mark.django_db
CALLS = "/admin/tools_app/toolcall/"



def shown(staff: Client, query: str) -> int:
    resp = staff.get(CALLS + query)
    assert resp.status_code == 200
    return int(resp.context["cl"].result_count)


def test_tools_list_has_health_badges_and_mcp_tools_first(staff: Client, tenant: Any) -> None:
    stocked(tenant)
    html = staff.get("/admin/tools_app/tool/").content.decode()
    assert '<span class="toolhub-badge ok"' in html and ">ok</span>" in html
    assert re.search(r'<span class="toolhub-badge bad"[^>]*>paused · \d+ min left</span>', html)
    assert '<span class="toolhub-badge warn"' in html and "1 failure</span>" in html
    assert '<span class="toolhub-badge muted" title="Built-in and HTTP tools have no health check">' in html
    names = re.findall(r'<th class="field-name"><a href="[^"]+">([\w-]+)</a>', html)
    assert names[:3] == ["crm-remote", "inventory-service-eu", "weather-forecasts"]  # before the 14 built-ins
    assert "delete_file" in names[3:]
    assert "1 to review" in html  # inventory's changed function


def test_tool_calls_filter_by_tool_agent_via_and_date_with_a_via_column(staff: Client, tenant: Any) -> None:
    stocked(tenant)
    calls = ToolCall.objects.filter(tenant=tenant)
    page = staff.get(CALLS)
    html = page.content.decode()
    assert '<th scope="col" class="sortable column-origin">' in html and ">Via</a>" in html
    assert "MCP gateway" in html and "Direct invoke" in html
    titles = [f.title for f in page.context["cl"].filter_specs]
    assert titles == ["status", "tool", "agent", "via", "created at"]
    weather = calls.filter(tool_name="weather-forecasts").first()
    assert weather is not None
    assert shown(staff, f"?tool__id__exact={weather.tool_id}") == 15
    assert shown(staff, f"?tool__id__exact={weather.tool_id}&via=gateway") == 5
    agent_id = calls.exclude(agent=None).values_list("agent_id", flat=True).first()
    assert shown(staff, f"?agent__id__exact={agent_id}") == 10
    midnight = timezone.localtime().replace(hour=0, minute=0, second=0, microsecond=0)
    since = (midnight - timedelta(days=7)).strftime("%Y-%m-%d %H:%M:%S%z")
    until = (midnight + timedelta(days=1)).strftime("%Y-%m-%d %H:%M:%S%z")
    recent = calls.filter(created_at__gte=midnight - timedelta(days=7)).count()
    assert 0 < recent < 30
    resp = staff.get(CALLS, {"created_at__gte": since, "created_at__lt": until})
    assert resp.context["cl"].result_count == recent
