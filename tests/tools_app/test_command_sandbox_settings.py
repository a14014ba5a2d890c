"""The command sandbox from settings: on by default, `TOOLHUB_COMMAND_SANDBOX=off` logged loudly, a bad bwrap path fails."""

from __future__ import annotations

import logging
import os
from typing import Any

import pytest

from tenants_app.models import Role
from tools_app.apps import warn_if_command_sandbox_off
from tools_app.models import Tool, ToolType
from tools_app.wiring.specs import builtin_context

pytestmark = pytest.mark.django_db


def _execute(tenant: Any, member_client: Any, command: str) -> dict[str, Any]:
    owner = member_client(tenant, Role.OWNER)
    tool = Tool.objects.get(tenant=tenant, type=ToolType.BUILTIN, name="execute_command")
    assert owner.put(f"/api/v1/tools/{tool.pk}/status/", {"status": "ENABLED"}, format="json").status_code == 200
    Tool.objects.filter(pk=tool.pk).update(requires_approval=False, safety="WRITE")
    resp = owner.post(f"/api/v1/tools/{tool.pk}/invoke/", {"function": "execute_command", "arguments": {
        "command": command}}, format="json")
    assert resp.status_code == 200, resp.content
    return dict(resp.json())


def test_sandbox_is_on_by_default_and_off_only_when_set(tenant: Any, settings: Any, caplog: Any) -> None:
    assert builtin_context(tenant).sandbox.enabled
    with caplog.at_level(logging.WARNING, logger="tools_app.sandbox"):
        assert warn_if_command_sandbox_off() is False
    assert not caplog.records
    settings.TOOLHUB_COMMAND_SANDBOX = False
    assert builtin_context(tenant).sandbox.enabled is False
    with caplog.at_level(logging.WARNING, logger="tools_app.sandbox"):
        assert warn_if_command_sandbox_off() is True
    assert any(r.levelno == logging.WARNING and "TOOLHUB_COMMAND_SANDBOX=off" in r.getMessage() for r in caplog.records)


def test_bwrap_path_setting_pointing_nowhere_fails_the_call(tenant: Any, member_client: Any, settings: Any) -> None:
    settings.TOOLHUB_COMMAND_SANDBOX_BWRAP = "/nonexistent/bwrap"
    result = _execute(tenant, member_client, "echo should-not-run")
    assert result["success"] is False and result["error_code"] == "EXECUTION_ERROR", result
    assert "apt-get install bubblewrap" in result["error"] and "should-not-run" not in str(result.get("text"))


@pytest.mark.skipif(not os.access("/usr/bin/bwrap", os.X_OK), reason="bubblewrap not installed")
def test_invoke_through_the_api_runs_sandboxed(tenant: Any, member_client: Any) -> None:
    result = _execute(tenant, member_client, "echo hi")
    assert result["success"] and result["data"]["sandboxed"] is True and "hi" in result["text"], result


def test_sandbox_off_setting_runs_unsandboxed(tenant: Any, member_client: Any, settings: Any) -> None:
    settings.TOOLHUB_COMMAND_SANDBOX = False
    result = _execute(tenant, member_client, "echo hi")
    assert result["success"] and result["data"]["sandboxed"] is False, result
