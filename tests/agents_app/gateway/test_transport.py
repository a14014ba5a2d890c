"""The answer's form on the wire: one JSON body when the server has nothing to stream, SSE when it has
(an elicitation riding on the call's own response stream)."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest

from agents_app.gateway import transport
from tests import loopback
from tests.waiting import scaled
from tools_app.models import Approval, ToolCall

pytestmark = pytest.mark.django_db(transaction=True)

VERSION = "2025-11-25"


def _headers(token: str, session_id: str | None = None) -> dict[str, str]:
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
               "Authorization": f"Bearer {token}", "Mcp-Protocol-Version": VERSION}
    if session_id:
        headers["Mcp-Session-Id"] = session_id
    return headers


def _open(http: httpx2.Client, url: str, token: str, capabilities: dict[str, Any]) -> str:
    init = http.post(url, headers=_headers(token), json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": VERSION, "capabilities": capabilities, "clientInfo": {"name": "probe", "version": "1"}}})
    assert init.status_code == 200, init.text
    session_id = init.headers["mcp-session-id"]
    done = http.post(url, headers=_headers(token, session_id),
                     json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert done.status_code == 202, done.text
    return str(session_id)


def _call(sku: str, request_id: int = 2) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
            "params": {"name": "inventory__get_inventory", "arguments": {"sku": sku}}}


def test_a_call_and_a_listing_answer_one_json_body(served: Any, setup: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # A handler silent for STREAM_AFTER_S (5 s) gets the SSE stream: on a loaded machine a plain call can be that slow.
    # Here the bound is a hang guard, so the answer's form depends on what the handler sends, not on the load.
    monkeypatch.setattr(transport, "STREAM_AFTER_S", scaled(60))
    url = served.endpoint("acme", setup.agent_id)
    with loopback.client(timeout=scaled(60)) as http:
        session_id = _open(http, url, setup.token, {})
        called = http.post(url, headers=_headers(setup.token, session_id), json=_call("DEMO-001"))
        listed = http.post(url, headers=_headers(setup.token, session_id),
                           json={"jsonrpc": "2.0", "id": 3, "method": "tools/list"})
    for resp in (called, listed):
        assert resp.status_code == 200, resp.text
        assert resp.headers["content-type"].startswith("application/json")
        assert resp.headers["mcp-session-id"] == session_id
    body = called.json()
    assert body["id"] == 2 and body["result"]["isError"] is False
    assert "DEMO-001" in body["result"]["content"][0]["text"]
    assert "inventory__get_inventory" in {t["name"] for t in listed.json()["result"]["tools"]}
    assert ToolCall.objects.get(function="get_inventory").via == "gateway"


def test_an_unknown_method_is_answered_as_json_too(served: Any, setup: Any) -> None:
    url = served.endpoint("acme", setup.agent_id)
    with loopback.client(timeout=scaled(60)) as http:
        session_id = _open(http, url, setup.token, {})
        resp = http.post(url, headers=_headers(setup.token, session_id),
                         json={"jsonrpc": "2.0", "id": 7, "method": "nosuch/method"})
    assert resp.status_code == 200 and resp.headers["content-type"].startswith("application/json")
    assert resp.json()["id"] == 7 and resp.json()["error"]["code"] == -32601


def _events(lines: Any) -> Any:
    """JSON-RPC messages of an SSE body, as they arrive."""
    for line in lines:
        if line.startswith("data:") and line[5:].strip():
            yield json.loads(line[5:].strip())


@pytest.mark.parametrize("approve", [True, False])
def test_an_elicitation_turns_the_answer_into_a_stream(served: Any, setup: Any, approve: bool) -> None:
    resp = setup.api.patch(f"/api/v1/tools/{setup.tool_id}/functions/get_inventory/", {"requires_approval": True},
                           format="json")
    assert resp.status_code == 200, resp.content
    url = served.endpoint("acme", setup.agent_id)
    with loopback.client(timeout=scaled(60)) as http:
        session_id = _open(http, url, setup.token, {"elicitation": {}})
        headers = _headers(setup.token, session_id)
        with http.stream("POST", url, headers=headers, json=_call("DEMO-001")) as stream:
            assert stream.status_code == 200
            assert stream.headers["content-type"].startswith("text/event-stream")
            events = _events(stream.iter_lines())
            asked = next(events)
            assert asked["method"] == "elicitation/create" and "DEMO-001" in asked["params"]["message"]
            answer = {"jsonrpc": "2.0", "id": asked["id"],
                      "result": {"action": "accept", "content": {"approve": approve}}}
            with loopback.client(timeout=scaled(60)) as other:  # the answer is its own POST while the stream stays open
                posted = other.post(url, headers=headers, json=answer)
            assert posted.status_code == 202, posted.text
            final = next(events)
    assert final["id"] == 2
    assert final["result"]["isError"] is (not approve)
    assert Approval.objects.get().status == ("approved" if approve else "denied")
