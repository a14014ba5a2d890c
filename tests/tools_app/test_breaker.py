"""The failure breaker counts incidents, not the calls that were in flight when one happened."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.factories import ToolFactory
from tools_app.models import Tool
from tools_app.services.breaker import record_outcome

pytestmark = pytest.mark.django_db


def fail(tool: Tool, started_at: object = None) -> Tool:
    record_outcome(tool_id=tool.pk, ok=False, error="MCP server exited with status -9", tenant_id=tool.tenant_id,
                   started_at=started_at)  # type: ignore[arg-type]
    return Tool.objects.get(pk=tool.pk)


def test_calls_in_flight_when_a_server_died_count_as_one_failure() -> None:
    tool = ToolFactory()
    began = timezone.now() - timedelta(seconds=1)  # every one of them started before the first failure was recorded
    for _ in range(5):
        tool = fail(tool, began)
    assert tool.consecutive_failures == 1 and tool.disabled_until is None
    assert "status -9" in tool.last_error


def test_failures_of_calls_started_after_the_last_failure_open_the_breaker() -> None:
    tool = ToolFactory()
    for _ in range(3):
        tool = fail(tool, timezone.now())  # each call began after the previous failure was recorded
    assert tool.consecutive_failures == 3 and tool.in_failure_window


def test_a_failure_without_a_start_time_always_counts() -> None:
    tool = ToolFactory()
    for _ in range(3):
        tool = fail(tool)  # a health probe
    assert tool.consecutive_failures == 3 and tool.in_failure_window


def test_a_failure_after_a_success_counts_even_if_the_call_began_earlier() -> None:
    tool = ToolFactory()
    began = timezone.now() - timedelta(seconds=1)
    record_outcome(tool_id=tool.pk, ok=True, tenant_id=tool.tenant_id)
    assert fail(tool, began).consecutive_failures == 1


def test_an_outage_of_the_deployment_does_not_count_against_the_tool() -> None:
    from tools_app.models import ToolType
    from tools_app.runtime.result import ToolResult
    from tools_app.services.invoke import _record_health

    tool = ToolFactory(type=ToolType.LOCAL)
    outage = ToolResult.fail("EXECUTION_ERROR", "no LOCAL server runner is live", outage="runner_unavailable")
    for _ in range(5):
        _record_health(tool, outage)
    tool.refresh_from_db()
    assert tool.consecutive_failures == 0 and tool.disabled_until is None
    _record_health(tool, ToolResult.fail("EXECUTION_ERROR", "MCP server exited with status 1"))
    tool.refresh_from_db()
    assert tool.consecutive_failures == 1  # the same family without the outage mark still counts


def test_a_refusal_for_want_of_a_server_slot_does_not_count_against_the_tool() -> None:
    """A tenant at its fair share of a runner's server slots is refused a new server (capacity_exceeded): the
    server never ran, so its breaker must not open (it would disable the tool for every member for the cool-down)."""
    from tools_app.models import ToolType
    from tools_app.runtime.result import ToolResult
    from tools_app.services.invoke import _record_health

    tool = ToolFactory(type=ToolType.LOCAL)
    refused = ToolResult.fail("EXECUTION_ERROR", "capacity_exceeded: this tenant already has 2 MCP sessions open",
                              error_type="capacity_exceeded")
    for _ in range(5):
        _record_health(tool, refused)
    tool.refresh_from_db()
    assert tool.consecutive_failures == 0 and tool.disabled_until is None
