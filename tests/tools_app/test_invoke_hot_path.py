"""The lean invoke path: a warm invoke writes its audit row and reads nothing else from the database; any
change to the tool, its functions or the caller's grants still holds on the very next call."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.db import connection, connections
from django.test.utils import CaptureQueriesContext
from guardian.shortcuts import assign_perm, remove_perm

from tenants_app.models import Role
from tests.fixtures.mcp_servers import MINI
from tests.fixtures.screen_count import screened_texts
from tests.tools_app.discovered import Discovered
from tools_app.models import CallStatus, Tool, ToolCall
from tools_app.wiring import pool as wiring_pool

pytestmark = pytest.mark.django_db(transaction=True)
ARGS = {"function": "get_inventory", "arguments": {"sku": "DEMO-001"}}


@pytest.fixture(scope="module")
def discovered() -> Discovered:
    return Discovered()


@pytest.fixture
def inventory(api: Any, discovered: Discovered) -> Iterator[int]:
    resp = api.post("/api/v1/tools/", {"name": "inventory", "type": "LOCAL", "config": {
        "command": sys.executable, "args": [str(MINI)], "startup_timeout_s": 20}}, format="json")
    assert resp.status_code == 201, resp.content
    tool_id = int(resp.json()["id"])
    assert "get_inventory" in [f["name"] for f in discovered.refresh(api, tool_id)["functions"]]  # its server listed once per module
    yield tool_id
    wiring_pool.pool().close_all()


def invoke(client: Any, tool_id: int) -> dict[str, Any]:
    resp = client.post(f"/api/v1/tools/{tool_id}/invoke/", ARGS, format="json")
    assert resp.status_code == 200, resp.content
    return dict(resp.json())


def warm_queries(client: Any, tool_id: int) -> list[str]:
    assert invoke(client, tool_id)["success"]  # warms the pool, the identity cache and the snapshots
    with CaptureQueriesContext(connection) as ctx:
        body = invoke(client, tool_id)
    assert body["success"] is True and ToolCall.objects.filter(pk=body["call_id"], status=CallStatus.OK).exists()
    return [q["sql"] for q in ctx.captured_queries]


@pytest.mark.parametrize("role", [Role.ADMIN, Role.MEMBER])
def test_a_warm_invoke_makes_one_query_its_audit_row(tenant: Any, member_client: Any, inventory: int,
                                                     role: Role) -> None:
    queries = warm_queries(member_client(tenant, role), inventory)
    assert len(queries) == 1, queries
    assert queries[0].startswith('INSERT INTO "tools_app_toolcall"')


def test_disable_and_enable_hold_on_the_next_call(api: Any, inventory: int) -> None:
    assert invoke(api, inventory)["success"]
    assert api.put(f"/api/v1/tools/{inventory}/status/", {"status": "DISABLED"}, format="json").status_code == 200
    refused = invoke(api, inventory)
    assert refused["success"] is False and refused["error_code"] == "DISABLED"
    assert refused["error_reason"] == "tool_disabled"
    assert api.put(f"/api/v1/tools/{inventory}/status/", {"status": "ENABLED"}, format="json").status_code == 200
    assert invoke(api, inventory)["success"]


def test_a_disabled_function_is_refused_on_the_next_call(api: Any, inventory: int) -> None:
    assert invoke(api, inventory)["success"]
    resp = api.patch(f"/api/v1/tools/{inventory}/functions/get_inventory/", {"enabled": False}, format="json")
    assert resp.status_code == 200, resp.content
    refused = invoke(api, inventory)
    assert refused["error_code"] == "DISABLED" and refused["error_reason"] == "function_disabled"


def test_a_grant_to_someone_else_narrows_the_tool_on_the_next_call(tenant: Any, member_client: Any,
                                                                   inventory: int) -> None:
    member, other = member_client(tenant, Role.MEMBER), member_client(tenant, Role.MEMBER)
    assert invoke(member, inventory)["success"]
    tool = Tool.objects.get(pk=inventory)
    assign_perm("tools_app.use_tool", other.user, tool)  # the tool is now restricted to its grantees
    refused = invoke(member, inventory)
    assert refused["error_code"] == "DISABLED" and refused["error_reason"] == "tool_not_usable"
    assert invoke(other, inventory)["success"]
    remove_perm("tools_app.use_tool", other.user, tool)
    assert invoke(member, inventory)["success"]


def test_a_demoted_member_is_refused_on_the_next_call(tenant: Any, member_client: Any, inventory: int) -> None:
    from tenants_app.models import Membership

    member = member_client(tenant, Role.MEMBER)
    assert invoke(member, inventory)["success"]
    membership = Membership.objects.get(user=member.user, tenant=tenant)
    membership.role = Role.VIEWER
    membership.save()
    assert member.post(f"/api/v1/tools/{inventory}/invoke/", ARGS, format="json").status_code == 403


def test_a_deleted_tool_is_not_found_on_the_next_call(api: Any, inventory: int) -> None:
    assert invoke(api, inventory)["success"]
    assert api.delete(f"/api/v1/tools/{inventory}/").status_code == 204
    resp = api.post(f"/api/v1/tools/{inventory}/invoke/", ARGS, format="json")
    assert resp.status_code == 404 and resp.json()["error"]["code"] == "not_found"


def test_another_tenants_tool_stays_not_found_warm(api: Any, other_api: Any, inventory: int) -> None:
    assert invoke(api, inventory)["success"]  # the snapshot is warm in this process
    resp = other_api.post(f"/api/v1/tools/{inventory}/invoke/", ARGS, format="json")
    assert resp.status_code == 404 and resp.json()["error"]["code"] == "not_found"


def test_with_the_hot_cache_off_every_call_reads_the_rows(api: Any, inventory: int, settings: Any) -> None:
    settings.TOOLHUB_HOT_CACHE_S = 0
    queries = warm_queries(api, inventory)
    assert len(queries) > 1 and any("tools_app_tool" in q and q.startswith("SELECT") for q in queries)


def test_a_config_change_reaches_the_server_on_the_next_call(api: Any, inventory: int) -> None:
    """The pool's spec is kept with the snapshot: a new config (here an env value) must not reuse the old one."""
    def echo() -> str:
        resp = api.post(f"/api/v1/tools/{inventory}/invoke/",
                        {"function": "echo_env", "arguments": {"name": "HOT_MARK"}}, format="json")
        assert resp.status_code == 200 and resp.json()["success"], resp.content
        return str(resp.json()["text"])

    assert echo() == "<unset>" and echo() == "<unset>"  # warm: the kept spec and session
    resp = api.patch(f"/api/v1/tools/{inventory}/", {"config": {
        "command": sys.executable, "args": [str(MINI)], "startup_timeout_s": 20, "env": {"HOT_MARK": "v2"}}},
        format="json")
    assert resp.status_code == 200, resp.content
    assert echo() == "v2"


class _Recorder(BaseHTTPRequestHandler):
    """Answers 200 {} and records, while the tool call waits on it, whether the caller's thread holds a DB
    connection (the test client runs the view on the test's thread)."""

    held: list[bool] = []
    caller_db: Any = None

    def do_GET(self) -> None:
        self.held.append(self.caller_db.connection is not None)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args: Any) -> None:
        pass


@pytest.mark.parametrize("pooled", [True, False])
def test_a_tool_call_waits_without_a_pooled_db_connection(api: Any, monkeypatch: Any, pooled: bool) -> None:
    """Under production's pool a connection held through a slow tool call is one fewer for every other request:
    a call that queried first (its snapshot was cold) gives it back before waiting. Without a pool (SQLite here)
    nobody else could use it and a reconnect costs ~1 ms, so it is kept."""
    monkeypatch.setattr("core.db.pooled", lambda alias="default": pooled)  # SQLite cannot take a pool option
    _Recorder.held, _Recorder.caller_db = [], connections["default"]
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        tool_id = api.post("/api/v1/tools/", {"name": "slow-system", "type": "HTTP", "config": {
            "method": "GET", "url": f"http://127.0.0.1:{server.server_address[1]}/x"}}, format="json").json()["id"]
        connection.ensure_connection()
        resp = api.post(f"/api/v1/tools/{tool_id}/invoke/", {"function": "call", "arguments": {}}, format="json")
    finally:
        server.shutdown()
        server.server_close()
    assert resp.status_code == 200 and resp.json()["success"] is True, resp.content
    assert _Recorder.held == [not pooled]
    # The audit row is written after the call all the same (on a connection taken again).
    assert ToolCall.objects.get(pk=resp.json()["call_id"]).status == CallStatus.OK


def test_a_warm_invoke_screens_each_text_of_its_result_once(api: Any, inventory: int,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The result is screened where invoke makes it, one pass per distinct text; its audit row reads the verdict
    in the result's meta (no second pass, no per-process memory of result texts)."""
    assert invoke(api, inventory)["success"]
    read = screened_texts(monkeypatch)
    body = invoke(api, inventory)
    assert body["success"] and ToolCall.objects.get(pk=body["call_id"]).result_flags == []
    assert read and len(read) == len(set(read)), read
    assert any("DEMO-001" in text for text in read), read
