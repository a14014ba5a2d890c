"""The tool page: functions above the config, the tool's recent calls, actions in HISTORY,
honest function badges, and a hint while functions are still being discovered."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.admin.models import LogEntry
from django.test import Client

from tenants_app.models import Role
from tests.factories import MembershipFactory, ToolFactory, UserFactory
from tools_app.models import CallStatus, ToolCall, ToolFunction

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff(tenant: Any) -> Client:
    user = UserFactory(username="tom", is_staff=True)
    MembershipFactory(tenant=tenant, user=user, role=Role.ADMIN)
    client = Client()
    client.force_login(user)
    return client


def page(staff: Client, tool: Any) -> str:
    return staff.get(f"/admin/tools_app/tool/{tool.pk}/change/").content.decode()


def test_functions_come_before_the_config_and_recent_calls_are_linked(staff: Client, tenant: Any) -> None:
    tool = ToolFactory(tenant=tenant, name="remote")
    ToolFunction.objects.create(tool=tool, name="lookup", input_schema={})
    calls = [ToolCall.objects.create(tenant=tenant, tool=tool, tool_name="remote", function="lookup", via="invoke",
                                     status=CallStatus.OK, cost_ms=12) for _ in range(3)]
    other = ToolFactory(tenant=tenant, name="other")
    ToolCall.objects.create(tenant=tenant, tool=other, tool_name="other", function="x", status=CallStatus.OK)
    html = page(staff, tool)
    assert html.index('id="functions-group"') < html.index("Remote MCP (HTTP) config")
    assert f'href="/admin/tools_app/toolcall/?tool__id__exact={tool.pk}"' in html
    for call in calls:
        assert f'href="/admin/tools_app/toolcall/{call.pk}/change/"' in html
    assert "/admin/tools_app/toolcall/" + str(ToolCall.objects.get(tool=other).pk) not in html


def test_actions_are_recorded_in_history(staff: Client, tenant: Any) -> None:
    tool = ToolFactory(tenant=tenant, name="remote", status="ENABLED")
    ToolFunction.objects.create(tool=tool, name="lookup", input_schema={})
    staff.post(f"/admin/tools_app/tool/{tool.pk}/status/", {"status": "DISABLED"})
    staff.post(f"/admin/tools_app/tool/{tool.pk}/function/", {"toggle": "lookup:0"})
    staff.post(f"/admin/tools_app/tool/{tool.pk}/test/")
    staff.post(f"/admin/tools_app/tool/{tool.pk}/refresh/")
    said = [e.get_change_message() for e in LogEntry.objects.filter(object_id=str(tool.pk)).order_by("pk")]
    assert said[0] == "Disabled the tool."
    assert said[1] == "Disabled function lookup."
    assert said[2].startswith("Test: failed") and said[3].startswith("Refresh: failed")
    history = staff.get(f"/admin/tools_app/tool/{tool.pk}/history/").content.decode()
    assert "Disabled function lookup." in history


def test_function_badges_say_when_the_tool_is_off(staff: Client, tenant: Any) -> None:
    tool = ToolFactory(tenant=tenant, name="remote", status="DISABLED")
    ToolFunction.objects.create(tool=tool, name="lookup", input_schema={})
    html = page(staff, tool)
    assert "tool disabled" in html and ">enabled</span>" not in html.split('id="functions-group"')[1][:4000]


def test_a_tool_without_functions_says_they_are_being_discovered(staff: Client, tenant: Any) -> None:
    tool = ToolFactory(tenant=tenant, name="fresh")
    html = page(staff, tool)
    assert "No functions yet" in html and "Refresh functions" in html


def test_a_loaded_tool_names_its_market_entry(staff: Client, tenant: Any) -> None:
    from market_app.models import MarketEntry, MarketSource

    source = MarketSource.objects.create(tenant=tenant, name="Team catalog", url="http://127.0.0.1:9/c.json")
    entry = MarketEntry.objects.create(source=source, name="io.example/crm", title="CRM server", content_hash="v2",
                                       description="Customers and deals, " * 20)
    tool = ToolFactory(tenant=tenant, name="crm", market_entry=entry, market_hash="v1")
    html = page(staff, tool)
    assert f'href="/admin/market_app/marketentry/{entry.pk}/change/" id="toolhub-market-entry">CRM server</a>' in html
    assert "a newer version is available" in html
    entry_page = staff.get(f"/admin/market_app/marketentry/{entry.pk}/change/").content.decode()
    assert 'id="toolhub-load-form"' in entry_page and 'class="closelink"' not in entry_page  # no stray Close
    listing = staff.get("/admin/market_app/marketentry/").content.decode()
    assert "Customers and deals, Customers" in listing and "CRM server" in listing
