"""A restart of PostgreSQL or Redis under the gateway: a 503 `service_unavailable` with Retry-After before the
response has started, a typed JSON-RPC error inside a session; never a 500 page or the driver's message."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx2
import pytest
from django.db import OperationalError
from redis.exceptions import ConnectionError as RedisConnectionError

from agents_app.gateway import principal, server
from tests import loopback
from tests.agents_app.gateway.clients import connect
from tests.waiting import scaled

pytestmark = pytest.mark.django_db(transaction=True)

MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "probe", "version": "1"}}}


@pytest.mark.parametrize(("exc", "what"), [
    (OperationalError("terminating connection due to administrator command"), "database"),
    (RedisConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused."), "cache"),
])
def test_an_outage_while_authenticating_answers_503_with_retry_after(
    served: Any, setup: Any, monkeypatch: Any, exc: Exception, what: str
) -> None:
    def down(**kwargs: Any) -> Any:
        raise exc

    monkeypatch.setattr(principal, "authenticate", down)  # what authenticate_remembering calls
    resp = loopback.post(served.endpoint("acme", setup.agent_id), json=INITIALIZE,
                         headers={**MCP_HEADERS, "Authorization": f"Bearer {setup.token}"})
    assert resp.status_code == 503
    assert resp.headers["retry-after"] == "2"
    error = resp.json()["error"]
    assert error["code"] == "service_unavailable" and error["details"]["service"] == what
    assert "administrator" not in resp.text and "refused" not in resp.text


def _failed_then_after(served: Any, setup: Any, recover: Any) -> tuple[Any, Any]:
    """One gateway session: a call during the outage (the JSON-RPC error it raised, or None), `recover()`, then the
    next call's result."""

    async def scenario() -> tuple[Any, Any]:
        async with connect(served.endpoint("acme", setup.agent_id), setup.token) as (session, _):
            try:
                await session.call_tool("inventory__get_inventory", {"sku": "DEMO-001"})
            except Exception as exc:  # noqa: BLE001 - the SDK raises the JSON-RPC error
                failed: Any = exc
            else:
                failed = None
            recover()
            return failed, await session.call_tool("inventory__get_inventory", {"sku": "DEMO-001"})

    return asyncio.run(scenario())


def test_an_outage_during_tools_call_is_a_typed_error_and_the_next_call_works(
    served: Any, setup: Any, monkeypatch: Any
) -> None:
    real = server._call
    state = {"down": True}

    def flaky(*args: Any, **kwargs: Any) -> Any:
        if state["down"]:
            raise OperationalError("terminating connection due to administrator command")
        return real(*args, **kwargs)

    monkeypatch.setattr(server, "_call", flaky)

    failed, after = _failed_then_after(served, setup, lambda: state.update(down=False))
    assert failed is not None
    error = failed.error
    assert error.code == server.ServiceUnavailable.CODE
    assert error.data == {"code": "service_unavailable", "service": "database", "retry_after_s": 2}
    assert "administrator" not in json.dumps(error.model_dump())
    assert not after.is_error and "DEMO-001" in after.content[0].text


def _post(url: str, token: str, body: dict[str, Any], session_id: str | None = None,
          method: str = "POST") -> httpx2.Response:
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {token}", "Mcp-Protocol-Version": "2025-06-18"}
    if session_id:
        headers["Mcp-Session-Id"] = session_id
    return loopback.request(method, url, json=body if method == "POST" else None, headers=headers, timeout=scaled(60))


def test_sessions_are_recorded_again_when_redis_comes_back_empty(served_pair: Any, setup: Any) -> None:
    from django.core.cache import cache

    from agents_app.gateway import sessions
    from tools_app import pool_broadcast

    first, second = served_pair
    url_a, url_b = first.endpoint("acme", setup.agent_id), second.endpoint("acme", setup.agent_id)
    init = _post(url_a, setup.token, INITIALIZE)
    session_id = init.headers["mcp-session-id"]
    assert _post(url_a, setup.token, {"jsonrpc": "2.0", "method": "notifications/initialized"},
                 session_id).status_code == 202
    ended = _post(url_a, setup.token, INITIALIZE).headers["mcp-session-id"]
    assert _post(url_a, setup.token, {}, ended, method="DELETE").status_code == 200
    cache.delete_many([sessions._key(session_id), sessions._key(ended)])  # what a Redis restart without persistence does
    tools_list = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    assert _post(url_b, setup.token, tools_list, session_id).status_code == 404  # the other process cannot adopt it
    pool_broadcast._reconnected()  # what the listener does once it is subscribed again
    listed = _post(url_b, setup.token, tools_list, session_id)
    assert listed.status_code == 200 and "inventory__get_inventory" in listed.text
    assert cache.get(sessions._key(ended)) is None  # an ended session is not brought back


def test_no_runner_for_a_local_tool_is_a_typed_outage_not_the_tools_error(served: Any, setup: Any) -> None:
    """No LOCAL server runner reachable (all down, or none announced yet after a Redis restart): tools/call answers
    the typed JSON-RPC error a client retries (`runner_unavailable`), not an isError result from the tool, and the
    next call after the runners are back works."""
    from core.outbound import OutboundPolicy
    from tests.fixtures.mcp_servers import free_port
    from tools_app.runtime.mcp import SessionPool
    from tools_app.runtime.runner.client import RunnerPool
    from tools_app.runtime.runner.placement import Registry
    from tools_app.wiring.pool import swap_pool

    nobody = Registry(f"redis://127.0.0.1:{free_port()}/0", ttl_s=30, secret="s")  # no runner known, Redis away
    old = swap_pool(RunnerPool(SessionPool(policy=OutboundPolicy.build("")), nobody, "s"))

    try:
        failed, after = _failed_then_after(served, setup, lambda: swap_pool(old))
    finally:
        swap_pool(old)
    assert failed is not None, "a runner outage came back as the tool's own result"
    assert failed.error.code == server.ServiceUnavailable.CODE
    assert failed.error.data == {"code": "runner_unavailable", "service": "runner", "retry_after_s": 2}
    assert "runner" in failed.error.message
    assert not after.is_error and "DEMO-001" in after.content[0].text
    from tools_app.models import Tool

    tool = Tool.objects.get(pk=setup.tool_id)  # the breaker did not count the outage
    assert tool.consecutive_failures == 0 and tool.disabled_until is None
