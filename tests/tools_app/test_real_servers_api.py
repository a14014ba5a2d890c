"""Real third-party MCP servers through the API: content kept whole, audit excerpts, annotations to safety."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from tests.fixtures import real_servers as rs
from tests.tools_app.discovered import Discovered
from tools_app.models import ToolCall
from tools_app.wiring.pool import pool
from tools_app.wiring.workspaces import workspace_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.real_servers]


@pytest.fixture(autouse=True)
def _close_pool() -> Any:
    yield
    pool().close_all()


@pytest.fixture
def npm_servers() -> None:
    rs.require("npm")


# The listings of this module's servers, each probed by the first refresh of its config (tests/tools_app/discovered.py):
# a later test's refresh of the same server stores that listing instead of starting the server once more for it.
DISCOVERED = Discovered()


def make(api: Any, name: str, config: dict[str, Any], tool_type: str = "LOCAL") -> int:
    resp = api.post("/api/v1/tools/", {"name": name, "type": tool_type, "config": config}, format="json")
    assert resp.status_code == 201, resp.content
    tool_id = int(resp.json()["id"])
    DISCOVERED.refresh(api, tool_id)
    return tool_id


def everything(api: Any) -> int:
    return make(api, "everything", {"command": rs.node(), "args": [rs.npm_entry(rs.EVERYTHING), "stdio"],
                                    "startup_timeout_s": 30})


def invoke(api: Any, tool_id: int, function: str, arguments: dict[str, Any]) -> dict[str, Any]:
    resp = api.post(f"/api/v1/tools/{tool_id}/invoke/", {"function": function, "arguments": arguments}, format="json")
    assert resp.status_code == 200, resp.content
    return dict(resp.json())


def test_invoke_body_keeps_the_content_list_and_audit_keeps_an_excerpt(api: Any, npm_servers: None,
                                                                       settings: Any) -> None:
    settings.TOOLHUB_AUDIT_RESULT_CHARS = 2000
    tool_id = everything(api)
    body = invoke(api, tool_id, "get-tiny-image", {})
    assert body["success"] is True, body
    image = body["content"][1]
    assert image["type"] == "image" and image["mimeType"] == "image/png"
    assert base64.b64decode(image["data"]).startswith(b"\x89PNG")
    assert "[image: image/png" in body["text"]
    row = ToolCall.objects.get(pk=body["call_id"])
    assert row.result_content is not None
    assert [b["type"] for b in row.result_content] == ["text", "image", "text"]
    stored = row.result_content[1]["data"]
    assert len(stored) < len(image["data"]) and stored.endswith(f"[{len(image['data'])} chars]")
    assert "[image: image/png" in row.result_excerpt


def test_text_only_tools_answer_a_content_list_too(api: Any, npm_servers: None) -> None:
    tool_id = everything(api)
    body = invoke(api, tool_id, "echo", {"message": "hello"})
    assert body["content"] == [{"type": "text", "text": "Echo: hello"}]


def memory(api: Any, tenant: Any) -> int:
    # In the tenant workspace: the only folder the server's sandbox may write.
    path = workspace_for(tenant) / "memory.jsonl"
    return make(api, "memory", {"command": rs.node(), "args": [rs.npm_entry(rs.MEMORY)],
                                "env": {"MEMORY_FILE_PATH": str(path)}, "startup_timeout_s": 30})


def test_annotations_set_each_functions_safety(api: Any, npm_servers: None, tenant: Any) -> None:
    tool_id = memory(api, tenant)
    functions = {f["name"]: f for f in api.get(f"/api/v1/tools/{tool_id}/").json()["functions"]}
    assert functions["read_graph"]["safety"] == "READ_ONLY"
    assert functions["create_entities"]["safety"] == "WRITE"
    assert functions["delete_entities"]["safety"] == "DESTRUCTIVE"
    assert functions["delete_entities"]["annotations"]["destructiveHint"] is True


def test_destructive_hint_needs_approval_until_an_admin_overrides_it(api: Any, npm_servers: None, tenant: Any) -> None:
    tool_id = memory(api, tenant)
    created = invoke(api, tool_id, "create_entities", {"entities": [
        {"name": "ada", "entityType": "person", "observations": ["wrote notes"]}]})
    assert created["success"], created
    held = invoke(api, tool_id, "delete_entities", {"entityNames": ["ada"]})
    assert held["error_code"] == "APPROVAL_REQUIRED" and "DESTRUCTIVE" in held["error"]
    assert "ada" in invoke(api, tool_id, "read_graph", {})["text"]

    resp = api.patch(f"/api/v1/tools/{tool_id}/functions/delete_entities/", {"safety": "WRITE"}, format="json")
    assert resp.status_code == 200, resp.content
    assert resp.json()["safety"] == "WRITE" and resp.json()["annotated_safety"] == "DESTRUCTIVE"
    assert invoke(api, tool_id, "delete_entities", {"entityNames": ["ada"]})["success"]
    assert "ada" not in invoke(api, tool_id, "read_graph", {})["text"]

    # null follows the annotations again.
    resp = api.patch(f"/api/v1/tools/{tool_id}/functions/delete_entities/", {"safety": None}, format="json")
    assert resp.json()["safety"] == "DESTRUCTIVE"


def test_safety_override_is_checked(api: Any, npm_servers: None, tenant: Any) -> None:
    tool_id = memory(api, tenant)
    resp = api.patch(f"/api/v1/tools/{tool_id}/functions/read_graph/", {"safety": "HARMLESS"}, format="json")
    assert resp.status_code == 400


def test_filesystem_server_gets_the_tenant_workspace_as_its_root(api: Any, tenant: Any, npm_servers: None) -> None:
    workspace = workspace_for(tenant)
    (workspace / "notes.txt").write_text("workspace notes")
    tool_id = make(api, "files", {"command": rs.node(), "args": [rs.npm_entry(rs.FILESYSTEM)],
                                  "startup_timeout_s": 30})
    allowed = invoke(api, tool_id, "list_allowed_directories", {})
    assert str(workspace) in allowed["text"], allowed
    read = invoke(api, tool_id, "read_text_file", {"path": str(workspace / "notes.txt")})
    assert read["success"] and "workspace notes" in read["text"], read
    functions = {f["name"]: f["safety"] for f in api.get(f"/api/v1/tools/{tool_id}/").json()["functions"]}
    assert functions["read_text_file"] == "READ_ONLY" and functions["write_file"] == "DESTRUCTIVE"


def test_server_log_messages_are_kept_in_the_audit_row(api: Any) -> None:
    import sys

    from tests.fixtures.mcp_servers import CLIENT_PROBE

    tool_id = make(api, "probe", {"command": sys.executable, "args": [str(CLIENT_PROBE)]})
    body = invoke(api, tool_id, "whoareyou", {})
    assert body["data"]["clientInfo"]["name"] == "toolhub"
    row = ToolCall.objects.get(pk=body["call_id"])
    assert row.server_logs == [{"level": "info", "logger": "probe", "data": "looking at the client"}]


def test_task_required_function_is_shown_unsupported_and_refused(api: Any) -> None:
    import sys

    from tests.fixtures.mcp_servers import CLIENT_PROBE

    tool_id = make(api, "probe", {"command": sys.executable, "args": [str(CLIENT_PROBE)]})
    functions = {f["name"]: f for f in api.get(f"/api/v1/tools/{tool_id}/").json()["functions"]}
    assert "MCP task" in functions["needs_task"]["unsupported_reason"]
    body = invoke(api, tool_id, "needs_task", {})
    assert body["error_code"] == "DISABLED" and body["error_reason"] == "function_unsupported"
