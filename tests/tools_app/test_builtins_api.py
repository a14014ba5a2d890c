"""Built-in and HTTP tools through POST /tools/{id}/invoke/, each call audited."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tenants_app.models import Role
from tests.fixtures import echo_http
from tools_app.models import CallStatus, Tool, ToolCall, ToolFunction, ToolStatus, ToolType

pytestmark = pytest.mark.django_db

ALL_BUILTINS = {"read_file", "list_directory", "write_file", "edit_file", "delete_file", "execute_command",
                "query_records", "read_record", "create_record", "update_record", "delete_record", "show_data",
                "query_all_tables", "query_table_schema", "execute_sql_query"}


@pytest.fixture
def owner(tenant: Any, member_client: Any) -> Any:
    return member_client(tenant, Role.OWNER)


def builtin(tenant: Any, name: str) -> Tool:
    return Tool.objects.get(tenant=tenant, type=ToolType.BUILTIN, name=name)


def enable(owner: Any, tool: Tool) -> None:
    resp = owner.put(f"/api/v1/tools/{tool.pk}/status/", {"status": "ENABLED"}, format="json")
    assert resp.status_code == 200, resp.content


def call(client: Any, tool: Tool, arguments: dict[str, Any], function: str | None = None) -> dict[str, Any]:
    resp = client.post(f"/api/v1/tools/{tool.pk}/invoke/", {"function": function or tool.name, "arguments": arguments},
                       format="json")
    assert resp.status_code == 200, resp.content
    return dict(resp.json())


def test_every_tenant_gets_the_nine_builtins_with_safe_defaults(tenant: Any) -> None:
    tools = {t.name: t for t in Tool.objects.filter(tenant=tenant, type=ToolType.BUILTIN)}
    assert set(tools) == ALL_BUILTINS
    for name in ("write_file", "edit_file", "delete_file", "execute_command", "execute_sql_query"):
        assert tools[name].status == ToolStatus.DISABLED, name
    assert tools["delete_file"].safety == "DESTRUCTIVE" and tools["delete_file"].requires_approval
    assert tools["read_file"].status == ToolStatus.ENABLED
    fn = ToolFunction.objects.get(tool=tools["read_file"])
    assert fn.input_schema["additionalProperties"] is False


def test_builtin_sync_is_idempotent(tenant: Any) -> None:
    from tools_app.services.builtins_sync import sync_builtin_tools

    before = list(Tool.objects.filter(tenant=tenant).values_list("pk", "name", "status"))
    assert sync_builtin_tools(tenant=tenant) == {"added": 0, "updated": 0, "retired": 0, "removed": 0}
    assert list(Tool.objects.filter(tenant=tenant).values_list("pk", "name", "status")) == before


def test_builtin_sync_never_overwrites_a_user_tool_holding_a_builtin_name(tenant: Any) -> None:
    """A built-in whose row is gone while a user tool holds its name stays out; the missing others come back with
    their function, as on a new tenant."""
    from tools_app.services.builtins_sync import sync_builtin_tools

    Tool.objects.filter(tenant=tenant, type=ToolType.BUILTIN, name__in=["read_file", "list_directory"]).delete()
    user_tool = Tool.objects.create(tenant=tenant, name="read_file", type=ToolType.REMOTE,
                                    config={"url": "http://127.0.0.1:9/mcp"})
    assert sync_builtin_tools(tenant=tenant) == {"added": 1, "updated": 0, "retired": 0, "removed": 0}
    assert Tool.objects.get(tenant=tenant, name="read_file").pk == user_tool.pk
    assert not Tool.objects.filter(tenant=tenant, builtin_name="read_file").exists()
    back = builtin(tenant, "list_directory")
    assert list(back.functions.values_list("name", "state")) == [("list_directory", "ACTIVE")]


def test_builtins_cannot_be_edited_or_deleted_and_only_owners_toggle(tenant: Any, api: Any, owner: Any) -> None:
    tool = builtin(tenant, "read_file")
    assert api.patch(f"/api/v1/tools/{tool.pk}/", {"description": "x"}, format="json").status_code == 403
    assert api.delete(f"/api/v1/tools/{tool.pk}/").status_code == 403
    assert api.put(f"/api/v1/tools/{tool.pk}/status/", {"status": "DISABLED"}, format="json").status_code == 403
    assert owner.put(f"/api/v1/tools/{tool.pk}/status/", {"status": "DISABLED"}, format="json").status_code == 200


def test_file_builtins_round_trip_with_audit(tenant: Any, owner: Any) -> None:
    for name in ("write_file", "edit_file", "delete_file"):
        enable(owner, builtin(tenant, name))
    wrote = call(owner, builtin(tenant, "write_file"), {"path": "notes/a.txt", "content": "hello world"})
    assert wrote["success"], wrote
    assert call(owner, builtin(tenant, "read_file"), {"path": "notes/a.txt"})["text"].count("hello world") == 1
    edited = call(owner, builtin(tenant, "edit_file"), {"path": "notes/a.txt", "old_text": "world", "new_text": "there"})
    assert edited["success"], edited
    assert "hello there" in call(owner, builtin(tenant, "read_file"), {"path": "notes/a.txt"})["text"]
    listing = call(owner, builtin(tenant, "list_directory"), {"path": ".", "recursive": True, "depth": 2})
    assert "a.txt" in json.dumps(listing["data"])
    # delete_file is DESTRUCTIVE: refused until a person approves (the approval flow lives in chat).
    refused = call(owner, builtin(tenant, "delete_file"), {"path": "notes", "recursive": True})
    assert refused["error_code"] == "APPROVAL_REQUIRED"
    assert ToolCall.objects.get(pk=refused["call_id"]).status == CallStatus.AWAITING_APPROVAL
    statuses = list(ToolCall.objects.filter(tenant=tenant).values_list("tool_name", "status"))
    assert ("write_file", "ok") in statuses and ("edit_file", "ok") in statuses


@pytest.mark.parametrize("path", ["../escape.txt", "/etc/passwd", "a\x00b"])
def test_workspace_escapes_are_refused(tenant: Any, owner: Any, path: str) -> None:
    result = call(owner, builtin(tenant, "read_file"), {"path": path})
    assert result["success"] is False and result["error_code"] == "INVALID_PARAMS"


def test_unknown_argument_names_the_accepted_ones(tenant: Any, owner: Any) -> None:
    result = call(owner, builtin(tenant, "read_file"), {"path": "x", "encoding": "latin-1"})
    assert result["error_code"] == "INVALID_PARAMS" and "path" in result["error"]


def test_execute_command_runs_allowlisted_and_refuses_shell(tenant: Any, owner: Any) -> None:
    tool = builtin(tenant, "execute_command")
    enable(owner, tool)
    Tool.objects.filter(pk=tool.pk).update(requires_approval=False, safety="WRITE")
    ok = call(owner, tool, {"command": "echo hi there"})
    assert ok["success"], ok
    assert "hi there" in ok["text"]
    for bad in ("echo hi; rm -rf /", "python3 -c 'print(1)'", "cat $(id)"):
        refused = call(owner, tool, {"command": bad})
        assert refused["success"] is False and refused["error_code"] == "INVALID_PARAMS", bad


def test_sql_builtins_on_the_demo_database(tenant: Any, owner: Any, sql_demo_db: Any) -> None:
    tables = call(owner, builtin(tenant, "query_all_tables"), {})
    assert tables["success"], tables
    assert {"customers", "products", "orders"} <= set(json.dumps(tables["data"]).replace('"', " ").split())
    ddl = call(owner, builtin(tenant, "query_table_schema"), {"table": "products"})
    assert ddl["success"] and "CREATE TABLE" in ddl["text"].upper()
    run = builtin(tenant, "execute_sql_query")
    enable(owner, run)
    rows = call(owner, run, {"sql": "SELECT count(*) AS n FROM customers"})
    assert rows["success"], rows
    assert rows["data"]["columns"] == ["n"]
    for bad in ("SELECT 1; DROP TABLE customers", "DELETE FROM customers", "SELECT * FROM sqlite_master"):
        refused = call(owner, run, {"sql": bad})
        assert refused["success"] is False and refused["error_code"] in ("INVALID_PARAMS", "BUSINESS_ERROR"), bad
    assert call(owner, run, {"sql": "SELECT count(*) AS n FROM customers"})["data"] == rows["data"]


def test_tenant_table_allowlist_override(tenant: Any, owner: Any, sql_demo_db: Any) -> None:
    tenant.sql_allowed_tables = ["products"]
    tenant.save()
    run = builtin(tenant, "execute_sql_query")
    enable(owner, run)
    assert call(owner, run, {"sql": "SELECT name FROM products"})["success"]
    assert call(owner, run, {"sql": "SELECT * FROM customers"})["success"] is False


@pytest.fixture
def echo_server() -> Iterator[str]:
    with echo_http.echo_server() as url:
        yield url


def test_http_tool_invoke(api: Any, echo_server: str) -> None:
    created = api.post("/api/v1/tools/", {"name": "lookup", "type": "HTTP", "config": {
        "method": "GET", "url": echo_server + "/items/${input.sku}", "headers": {"X-Key": "${secret.key}"},
        "secrets": {"key": "http-canary-55"},
        "input_schema": {"type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"]}}},
        format="json")
    assert created.status_code == 201, created.content
    tool_id = created.json()["id"]
    assert [f["name"] for f in created.json()["functions"]] == ["call"]
    resp = api.post(f"/api/v1/tools/{tool_id}/invoke/", {"function": "call", "arguments": {"sku": "DEMO 1"}},
                    format="json")
    body = resp.json()
    assert body["success"], body
    assert body["data"]["path"] == "/items/DEMO%201"
    assert body["data"]["key"] == "********"  # the secret reached the server, the result shows it masked
    assert b"http-canary-55" not in resp.content
    assert "http-canary-55" not in ToolCall.objects.get(pk=body["call_id"]).result_excerpt


def test_http_tool_non_2xx_is_business_error(api: Any, echo_server: str) -> None:
    tool_id = api.post("/api/v1/tools/", {"name": "missing", "type": "HTTP", "config": {
        "method": "GET", "url": echo_server + "/missing"}}, format="json").json()["id"]
    body = api.post(f"/api/v1/tools/{tool_id}/invoke/", {"function": "call", "arguments": {}}, format="json").json()
    assert body["error_code"] == "BUSINESS_ERROR" and "404" in body["error"] and "no such thing" in body["error"]


def test_invoke_is_throttled_with_retry_after(tenant: Any, owner: Any, monkeypatch: Any) -> None:
    from django.core.cache import cache
    from rest_framework.throttling import ScopedRateThrottle

    cache.clear()
    monkeypatch.setattr(ScopedRateThrottle, "THROTTLE_RATES", {"invoke": "2/min", "test": "2/min", "chat": "2/min"})
    tool = builtin(tenant, "list_directory")
    for _ in range(2):
        assert call(owner, tool, {})["success"]
    resp = owner.post(f"/api/v1/tools/{tool.pk}/invoke/", {"function": tool.name, "arguments": {}}, format="json")
    assert resp.status_code == 429
    assert resp.json()["error"]["code"] == "throttled"
    assert int(resp["Retry-After"]) > 0
    cache.clear()


def test_nul_in_arguments_is_audited_safely(tenant: Any, owner: Any) -> None:
    result = call(owner, builtin(tenant, "read_file"), {"path": "a\x00b"})
    row = ToolCall.objects.get(pk=result["call_id"])
    assert row.arguments == {"path": "a\\x00b"}


def test_secret_in_http_tool_url_never_reaches_logs(api: Any, echo_server: str, caplog: Any) -> None:
    import logging

    # Django applied settings.LOGGING at setup; the root at INFO would show httpx2's request lines.
    caplog.set_level(logging.INFO)
    tool_id = api.post("/api/v1/tools/", {"name": "q", "type": "HTTP", "config": {
        "method": "GET", "url": echo_server + "/q?token=${secret.t}", "secrets": {"t": "url-canary-77"}}},
        format="json").json()["id"]
    body = api.post(f"/api/v1/tools/{tool_id}/invoke/", {"function": "call", "arguments": {}}, format="json").json()
    assert body["success"], body
    assert "url-canary-77" not in caplog.text
    assert "url-canary-77" not in json.dumps(body)
