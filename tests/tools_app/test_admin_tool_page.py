"""The tool page: functions above the config, the tool's recent calls, actions in HISTORY,
honest function badges, and a hint while functions are still being discovered."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.admin.models import LogEntry
from django.test import Client
from django.utils import timezone

from tests.factories import ToolFactory
from tools_app.models import CallStatus, Tool, ToolCall, ToolFunction

pytestmark = pytest.mark.django_db



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
    hint = html.split('id="toolhub-no-functions">')[1].split("</p>")[0]
    assert "discovering…" in hint and "Refresh functions" in hint
    # The background discovery failed: the hint says so and why, instead of "discovering" for ever.
    Tool.objects.filter(pk=tool.pk).update(last_checked_at=timezone.now(),
                                           last_error="connection refused by 127.0.0.1:9")
    hint = page(staff, tool).split('id="toolhub-no-functions">')[1].split("</p>")[0]
    assert "discovery failed" in hint and "connection refused by 127.0.0.1:9" in hint and "discovering" not in hint
    # A config saved after that check: discovering again.
    tool.refresh_from_db()
    tool.save()
    assert "discovering…" in page(staff, tool)
    ToolFunction.objects.create(tool=tool, name="lookup", input_schema={})
    assert 'id="toolhub-no-functions"' not in page(staff, tool)


def test_a_destructive_function_says_it_always_asks(staff: Client, tenant: Any) -> None:
    tool = ToolFactory(tenant=tenant, name="files", safety="WRITE")
    ToolFunction.objects.create(tool=tool, name="wipe", input_schema={}, annotations={"destructiveHint": True})
    ToolFunction.objects.create(tool=tool, name="remove", input_schema={}, safety_override="DESTRUCTIVE")
    ToolFunction.objects.create(tool=tool, name="peek", input_schema={}, annotations={"readOnlyHint": True})
    html = page(staff, tool)
    rows = {name: html.split(f"files.{name}")[1].split("</tr>")[0] for name in ("wipe", "remove", "peek")}
    assert "always (destructive)" in rows["wipe"] and "always (destructive)" in rows["remove"]
    assert "as the tool" not in rows["wipe"] + rows["remove"] and "no (as the tool)" in rows["peek"]
    listing = staff.get("/admin/tools_app/toolfunction/?q=wipe").content.decode()
    assert "always (destructive)" in listing


def test_a_try_is_recorded_in_history(staff: Client, tenant: Any) -> None:
    tool = Tool.objects.get(tenant=tenant, type="BUILTIN", name="list_directory")
    Tool.objects.filter(pk=tool.pk).update(status="ENABLED")
    resp = staff.post(f"/admin/tools_app/tool/{tool.pk}/try/", {"function": "list_directory", "arg:path": "."})
    assert resp.status_code == 200 and 'id="toolhub-result"' in resp.content.decode()
    call = ToolCall.objects.filter(tool=tool).latest("pk")
    said = [e.get_change_message() for e in LogEntry.objects.filter(object_id=str(tool.pk))]
    assert said == [f"Tried list_directory: OK (call #{call.pk})."]


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


def test_list_actions_and_approving_a_change_are_recorded_in_history(staff: Client, tenant: Any) -> None:
    tool = ToolFactory(tenant=tenant, name="remote", status="ENABLED")
    ToolFunction.objects.create(tool=tool, name="lookup", input_schema={}, state="CHANGED")
    listing = "/admin/tools_app/tool/"
    for action in ("disable_tools", "test_tools", "refresh_functions", "approve_changed_functions"):
        staff.post(listing, {"action": action, "_selected_action": [tool.pk]})
    said = [e.get_change_message() for e in LogEntry.objects.filter(object_id=str(tool.pk)).order_by("pk")]
    assert said[0] == "Disabled the tool." and said[1].startswith("Test: failed")
    assert said[2].startswith("Refresh: failed") and said[3] == "Approved function lookup."
    other = ToolFactory(tenant=tenant, name="drifting")
    ToolFunction.objects.create(tool=other, name="grow", input_schema={}, state="CHANGED")
    staff.post(f"/admin/tools_app/tool/{other.pk}/changes/", {"function": "grow"})
    assert [e.get_change_message() for e in LogEntry.objects.filter(object_id=str(other.pk))] == [
        "Approved function grow."]


def test_function_actions_are_recorded_in_the_functions_history(staff: Client, tenant: Any) -> None:
    tool = ToolFactory(tenant=tenant, name="remote")
    fn = ToolFunction.objects.create(tool=tool, name="wipe", input_schema={}, state="CHANGED")
    listing = "/admin/tools_app/toolfunction/"
    staff.post(listing, {"action": "approve", "_selected_action": [fn.pk]})
    staff.post(listing, {"action": "safety_destructive", "_selected_action": [fn.pk]})
    staff.post(listing, {"action": "safety_from_annotations", "_selected_action": [fn.pk]})
    said = [e.get_change_message() for e in LogEntry.objects.filter(object_id=str(fn.pk)).order_by("pk")]
    assert said == ["Approved the current definition.", "Safety set to DESTRUCTIVE.",
                    "Safety from the server's annotations (override cleared)."]
