"""MCP tools end to end through the API: real servers over stdio, streamable HTTP and SSE."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

from core.secrets import MASK
from tests.fixtures.mcp_servers import CHANGING, HANG_INIT, INVENTORY, MINI, http_server
from tests.tools_app.discovered import Discovered
from tools_app.models import CallStatus, FunctionState, Tool, ToolCall
from tools_app.wiring.http import outbound_policy
from tools_app.wiring.pool import pool
from tools_app.wiring.workspaces import workspace_for

pytestmark = pytest.mark.django_db(transaction=True)


def children_of_pool() -> set[int]:
    """Live child pids of this process (MCP stdio servers are our direct children)."""
    me = os.getpid()
    kids = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            if int(fields[1]) == me and fields[0] != "Z":
                kids.add(int(entry.name))
    return kids


@pytest.fixture(autouse=True)
def _close_pool() -> Any:
    yield
    pool().close_all()


@pytest.fixture(scope="module")
def discovered() -> Discovered:
    """The inventory server's listing for the tests about calls, probed once (tests/tools_app/discovered.py)."""
    return Discovered()


def make(api: Any, name: str, tool_type: str, config: dict[str, Any]) -> int:
    resp = api.post("/api/v1/tools/", {"name": name, "type": tool_type, "config": config}, format="json")
    assert resp.status_code == 201, resp.content
    return int(resp.json()["id"])


def local_inventory(api: Any, server: Path = MINI, **extra: Any) -> int:
    """The inventory over stdio: MINI (no SDK: milliseconds to start) where the test is about Toolhub's side, the
    SDK-built INVENTORY where it is about speaking to an SDK server (tests/fixtures/mcp_servers/stdio_core.py)."""
    return make(api, "inventory", "LOCAL", {"command": sys.executable, "args": [str(server)],
                                             "startup_timeout_s": 20, "call_timeout_s": 10, **extra})


def refresh(api: Any, tool_id: int) -> dict[str, Any]:
    resp = api.post(f"/api/v1/tools/{tool_id}/refresh/")
    assert resp.status_code == 200, resp.content
    return dict(resp.json())


def invoke(api: Any, tool_id: int, function: str, arguments: dict[str, Any]) -> dict[str, Any]:
    resp = api.post(f"/api/v1/tools/{tool_id}/invoke/", {"function": function, "arguments": arguments}, format="json")
    assert resp.status_code == 200, resp.content
    return dict(resp.json())


def test_stdio_test_refresh_and_invoke(api: Any) -> None:
    tool_id = local_inventory(api, INVENTORY)  # the SDK's stdio server end to end
    tested = api.post(f"/api/v1/tools/{tool_id}/test/").json()
    assert tested["ok"] is True, tested
    names = {f["name"] for f in tested["functions"]}
    assert {"get_inventory", "echo_env", "whoami"} <= names
    assert tested["tool_count"] == len(tested["functions"]) > 1
    assert tested["server"]["name"] and tested["protocol_version"]
    assert tested["changes"] == {"added": len(names), "removed": 0, "changed": 0}
    assert refresh(api, tool_id)["ok"]
    detail = api.get(f"/api/v1/tools/{tool_id}/").json()
    assert {f["name"] for f in detail["functions"]} == names
    assert all(f["state"] == "ACTIVE" for f in detail["functions"])

    found = invoke(api, tool_id, "get_inventory", {"sku": "DEMO-001"})
    assert found["success"] is True, found
    assert found["data"]["quantity"] == 12
    assert invoke(api, tool_id, "get_inventory", {"sku": "DEMO-002"})["data"]["quantity"] == 0
    assert invoke(api, tool_id, "get_inventory", {"sku": "NOPE"})["data"]["found"] is False
    call = ToolCall.objects.get(pk=found["call_id"])
    assert (call.status, call.function, call.arguments) == (CallStatus.OK, "get_inventory", {"sku": "DEMO-001"})


def test_warm_session_is_reused_across_requests(api: Any, discovered: Discovered) -> None:
    tool_id = local_inventory(api)
    discovered.refresh(api, tool_id)  # what matters here is the calls after
    invoke(api, tool_id, "get_inventory", {"sku": "DEMO-001"})
    before = pool().stats()
    for _ in range(3):
        invoke(api, tool_id, "get_inventory", {"sku": "DEMO-001"})
    after = pool().stats()
    assert after["processes_spawned"] == before["processes_spawned"]
    assert after["sessions_opened"] == before["sessions_opened"]


def test_config_change_recycles_and_env_cwd_reach_child(api: Any, tenant: Any, monkeypatch: Any) -> None:
    monkeypatch.setenv("TOOLHUB_SECRET_KEYS", "must-not-leak")
    monkeypatch.setenv("DATABASE_URL", "postgres://leak")
    # cwd is a folder of the tenant workspace (relative to it): the only place a sandboxed server may run.
    (workspace_for(tenant) / "data").mkdir(exist_ok=True)
    tool_id = local_inventory(api, env={"GREETING": "hello"}, cwd="data")
    refresh(api, tool_id)
    # The child has the configured value; a server echoing its env gets it scrubbed on the way out.
    assert invoke(api, tool_id, "echo_env", {"name": "GREETING"})["text"] == MASK
    assert invoke(api, tool_id, "echo_env", {"name": "TOOLHUB_SECRET_KEYS"})["text"] == "<unset>"
    assert invoke(api, tool_id, "echo_env", {"name": "DATABASE_URL"})["text"] == "<unset>"
    who = invoke(api, tool_id, "whoami", {})
    assert str(workspace_for(tenant) / "data") in str(who["data"] or who["text"])
    spawned = pool().stats()["processes_spawned"]
    resp = api.patch(f"/api/v1/tools/{tool_id}/", {"config": {
        "command": sys.executable, "args": [str(MINI)], "env": {"GREETING": "********"}, "cwd": "data"}},
        format="json")
    assert resp.json()["config_version"] == 2
    assert invoke(api, tool_id, "echo_env", {"name": "GREETING"})["text"] == MASK
    assert pool().stats()["processes_spawned"] > spawned


@pytest.mark.parametrize("transport", ["streamable-http", "sse"])
def test_remote_transports_end_to_end(api: Any, transport: str) -> None:
    with http_server(INVENTORY, transport=transport) as url:
        tool_id = make(api, f"inv-{transport}", "REMOTE",
                       {"url": url, "transport": transport.replace("-", "_"), "timeout_s": 10})
        tested = api.post(f"/api/v1/tools/{tool_id}/test/").json()
        assert tested["ok"], tested
        refresh(api, tool_id)
        assert invoke(api, tool_id, "get_inventory", {"sku": "DEMO-001"})["data"]["quantity"] == 12


def test_remote_required_header_reaches_server_and_is_never_echoed(api: Any) -> None:
    with http_server(INVENTORY, extra_args=("--require-key", "k-canary-99")) as url:
        bad = make(api, "bad", "REMOTE", {"url": url, "headers": {"X-Api-Key": "wrong-canary"}, "timeout_s": 5})
        resp = api.post(f"/api/v1/tools/{bad}/test/")
        body = resp.json()
        assert body["ok"] is False and body["error"]["code"] == "remote_http_error"
        assert body["error"]["details"] == {"status": 401}
        assert b"wrong-canary" not in resp.content
        good = make(api, "good", "REMOTE", {"url": url, "headers": {"X-Api-Key": "k-canary-99"}, "timeout_s": 5})
        assert api.post(f"/api/v1/tools/{good}/test/").json()["ok"] is True


def test_drift_is_held_until_approved(api: Any, tenant: Any) -> None:
    state = workspace_for(tenant) / "state"  # in the workspace: the sandboxed server can write only there
    tool_id = make(api, "changing", "LOCAL", {"command": sys.executable, "args": [str(CHANGING)],
                                              "env": {"TOOLHUB_FIXTURE_STATE": str(state)}})
    first = refresh(api, tool_id)
    assert first["ok"] and first["changes"]["added"] >= 1
    trusted = set(Tool.objects.get(pk=tool_id).functions.values_list("name", flat=True))
    second = refresh(api, tool_id)  # a new function appears
    assert second["changes"]["added"] == 1
    new = Tool.objects.get(pk=tool_id).functions.exclude(name__in=trusted).get()
    assert new.state == FunctionState.CHANGED
    refused = invoke(api, tool_id, new.name, {})
    assert refused["success"] is False and refused["error_code"] == "DISABLED"
    assert refused["error_reason"] == "function_changed" and "approve" in refused["error"]
    options = api.get("/api/v1/tools/options/").json()
    offered = next(t for t in options if t["id"] == tool_id)
    assert new.name not in {f["name"] for f in offered["functions"]}
    approved = api.post(f"/api/v1/tools/{tool_id}/functions/{new.name}/approve/")
    assert approved.status_code == 200 and approved.json()["state"] == "ACTIVE"
    third = refresh(api, tool_id)  # an existing schema changes
    assert third["changes"]["changed"] == 1
    changed = Tool.objects.get(pk=tool_id).functions.get(name=third["changed_functions"]["changed"][0])
    assert changed.state == FunctionState.CHANGED


def test_invoke_refusals(api: Any, discovered: Discovered) -> None:
    tool_id = local_inventory(api)
    discovered.refresh(api, tool_id)  # what matters here is the calls after
    unknown_arg = invoke(api, tool_id, "get_inventory", {"sku": "DEMO-001", "colour": "red"})
    assert unknown_arg["error_code"] == "INVALID_PARAMS" and "sku" in unknown_arg["error"]
    assert unknown_arg["error_reason"] is None  # a bad argument has no refusal cause beyond its family
    missing = invoke(api, tool_id, "nope", {})
    assert missing["error_code"] == "NOT_FOUND" and "get_inventory" in missing["error"]
    assert missing["error_reason"] == "function_missing"
    api.patch(f"/api/v1/tools/{tool_id}/functions/get_inventory/", {"enabled": False}, format="json")
    disabled = invoke(api, tool_id, "get_inventory", {"sku": "x"})
    assert (disabled["error_code"], disabled["error_reason"]) == ("DISABLED", "function_disabled")
    api.patch(f"/api/v1/tools/{tool_id}/functions/get_inventory/", {"enabled": True, "requires_approval": True},
              format="json")
    needs = invoke(api, tool_id, "get_inventory", {"sku": "x"})
    assert needs["error_code"] == "APPROVAL_REQUIRED"
    assert ToolCall.objects.get(pk=needs["call_id"]).status == CallStatus.AWAITING_APPROVAL
    api.put(f"/api/v1/tools/{tool_id}/status/", {"status": "DISABLED"}, format="json")
    off = invoke(api, tool_id, "get_inventory", {"sku": "x"})
    assert (off["error_code"], off["error_reason"]) == ("DISABLED", "tool_disabled")


def test_startup_timeout_is_typed_and_leaves_no_process(api: Any) -> None:
    before = children_of_pool()
    tool_id = make(api, "hang", "LOCAL", {"command": sys.executable, "args": [str(HANG_INIT)], "startup_timeout_s": 1})
    body = api.post(f"/api/v1/tools/{tool_id}/test/").json()
    assert body["ok"] is False and body["error"]["code"] == "startup_timeout"
    assert children_of_pool() <= before


def test_command_not_found_names_the_command(api: Any) -> None:
    tool_id = make(api, "ghost", "LOCAL", {"command": "no-such-binary-xyz"})
    body = api.post(f"/api/v1/tools/{tool_id}/test/").json()
    assert body["ok"] is False and body["error"]["code"] == "command_not_found"
    assert body["error"]["details"] == {"command": "no-such-binary-xyz"}


def test_breaker_opens_after_three_failures(api: Any) -> None:
    tool_id = make(api, "ghost", "LOCAL", {"command": "no-such-binary-xyz"})
    for _ in range(3):
        api.post(f"/api/v1/tools/{tool_id}/test/")
    tool = Tool.objects.get(pk=tool_id)
    assert tool.consecutive_failures == 3 and tool.in_failure_window
    assert "no-such-binary-xyz" in tool.last_error
    api.patch(f"/api/v1/tools/{tool_id}/", {"config": {"command": sys.executable, "args": [str(MINI)]}}, format="json")
    tool.refresh_from_db()
    assert tool.consecutive_failures == 0 and tool.disabled_until is None


def test_health_sweep_records_state_in_db(api: Any) -> None:
    from tools_app.services.health import check_all_tools

    good = local_inventory(api)
    bad = make(api, "ghost", "LOCAL", {"command": "no-such-binary-xyz"})
    counts = check_all_tools(concurrency=2)
    assert counts == {"checked": 2, "ok": 1, "failed": 1}
    assert Tool.objects.get(pk=good).last_ok_at is not None
    assert Tool.objects.get(pk=bad).consecutive_failures == 1


def test_private_address_refused_when_loopback_not_allowed(api: Any, settings: Any) -> None:
    settings.TOOLHUB_OUTBOUND_ALLOW = ""
    from tools_app.runtime.mcp.pool import SessionPool
    from tools_app.wiring.pool import swap_pool

    mine = SessionPool(policy=outbound_policy())
    old = swap_pool(mine)
    try:
        tool_id = make(api, "meta", "REMOTE", {"url": "http://169.254.169.254/mcp", "timeout_s": 2})
        body = api.post(f"/api/v1/tools/{tool_id}/test/").json()
        assert body["ok"] is False and body["error"]["code"] == "outbound_blocked"
    finally:
        mine.shutdown()
        swap_pool(old)


def test_functions_are_discovered_after_create(api: Any, settings: Any) -> None:
    """On save, a task rediscovers (inline without a broker, in the worker in CI)."""
    from tests.waiting import wait_until

    settings.TOOLHUB_DISCOVER_ON_SAVE = True
    tool_id = local_inventory(api)
    wait_until(lambda: Tool.objects.get(pk=tool_id).functions.exists(), every_s=0.2)
    assert "get_inventory" in set(Tool.objects.get(pk=tool_id).functions.values_list("name", flat=True))
