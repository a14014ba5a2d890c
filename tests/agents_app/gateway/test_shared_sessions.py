"""Two Toolhub processes behind one URL: a session opened on one is answered by the other."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest

from tenants_app.models import Role
from tenants_app.services import token_for_user
from tests import loopback
from tests.waiting import scaled
from tools_app.models import ToolCall

pytestmark = pytest.mark.django_db(transaction=True)

VERSION = "2025-06-18"


def _post(url: str, token: str, body: dict[str, Any], session_id: str | None = None) -> httpx2.Response:
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
               "Authorization": f"Bearer {token}", "Mcp-Protocol-Version": VERSION}
    if session_id:
        headers["Mcp-Session-Id"] = session_id
    return loopback.post(url, json=body, headers=headers, timeout=scaled(60))


def _message(resp: httpx2.Response) -> dict[str, Any]:
    """The JSON-RPC response in an SSE or JSON body."""
    if resp.headers.get("content-type", "").startswith("application/json"):
        return dict(resp.json())
    for line in resp.text.splitlines():
        if line.startswith("data: ") and '"id"' in line:
            return dict(json.loads(line[6:]))
    raise AssertionError(resp.text)


def _open(url: str, token: str) -> str:
    init = _post(url, token, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "probe", "version": "1"}}})
    assert init.status_code == 200, init.text
    session_id = init.headers["mcp-session-id"]
    done = _post(url, token, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session_id)
    assert done.status_code == 202
    return session_id


def test_a_session_opened_on_one_process_is_answered_by_the_other(served_pair: Any, setup: Any) -> None:
    first, second = served_pair
    session_id = _open(first.endpoint("acme", setup.agent_id), setup.token)
    url_b = second.endpoint("acme", setup.agent_id)
    listed = _post(url_b, setup.token, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, session_id)
    assert listed.status_code == 200, listed.text
    names = [t["name"] for t in _message(listed)["result"]["tools"]]
    assert "inventory__get_inventory" in names
    called = _post(url_b, setup.token, {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "inventory__get_inventory", "arguments": {"sku": "DEMO-001"}}}, session_id)
    assert "DEMO-001" in _message(called)["result"]["content"][0]["text"]
    assert ToolCall.objects.get(function="get_inventory").via == "gateway"


def test_another_credential_cannot_adopt_a_session(served_pair: Any, setup: Any, member_client: Any) -> None:
    first, second = served_pair
    session_id = _open(first.endpoint("acme", setup.agent_id), setup.token)
    other = token_for_user(user=member_client(setup.tenant, Role.ADMIN).user)
    refused = _post(second.endpoint("acme", setup.agent_id), other,
                    {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, session_id)
    assert refused.status_code == 404
