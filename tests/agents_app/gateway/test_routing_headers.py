"""A 2026-07-28 request's Mcp-Method/Mcp-Name headers let the role check and a spent invoke throttle answer
before its body is parsed: a viewer's call and a throttled member's next call are refused from the headers (a
body that is not even JSON gets the same answer), what they may do is untouched, and nothing runs."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx2
import pytest
from django.core.cache import cache
from mcp.shared.exceptions import MCPError

from agents_app.gateway import routing
from core.throttle import ScopedWindowThrottle
from tenants_app.models import Role
from tenants_app.services import token_for_user
from tests import loopback
from tests.agents_app.gateway.modern import MODERN, client
from tests.waiting import scaled
from tools_app.models import ToolCall

pytestmark = pytest.mark.django_db(transaction=True)
CALL = ("inventory__get_inventory", {"sku": "DEMO-001"})
NOT_JSON = b"{this is not JSON"


def _raw(url: str, token: str, method: str, name: str = "", body: bytes = NOT_JSON) -> httpx2.Response:
    return loopback.post(url, content=body, timeout=scaled(60), headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
        "Authorization": f"Bearer {token}", "Mcp-Protocol-Version": MODERN, "Mcp-Method": method,
        **({"Mcp-Name": name} if name else {})})


@pytest.fixture(autouse=True)
def _fresh_throttle_memory() -> Any:
    routing._spent.clear()
    yield
    routing._spent.clear()


def test_a_viewers_call_is_refused_from_its_headers(served: Any, setup: Any, member_client: Any) -> None:
    viewer = member_client(setup.tenant, Role.VIEWER)
    token = token_for_user(user=viewer.user)
    url = served.endpoint("acme", setup.agent_id)
    for method in ("tools/call", "prompts/get", "resources/read"):
        refused = _raw(url, token, method, "inventory__get_inventory")
        assert refused.status_code == 403, (method, refused.text)  # not -32700: the body was never parsed
        error = refused.json()["error"]
        assert refused.json()["id"] is None and error["data"]["code"] == "permission_denied"
        assert error["data"]["error_reason"] == "viewer_may_not_call" and "viewers may list" in error["message"]
    listing = _raw(url, token, "tools/list")
    assert listing.status_code == 400 and listing.json()["error"]["code"] == -32700  # listing is read as usual

    async def scenario() -> tuple[Any, Any]:
        async with client(url, token, mode=MODERN) as connected:
            listed = await connected.list_tools()
            with pytest.raises(MCPError) as info:
                await connected.call_tool(*CALL)
            return listed, info.value.error

    listed, error = asyncio.run(scenario())
    assert "inventory__get_inventory" in [t.name for t in listed.tools]
    assert error.data["code"] == "permission_denied"  # the SDK's client reads the id-less error as its call's
    assert not ToolCall.objects.exists()


def test_a_members_call_is_not_refused_from_its_headers(served: Any, setup: Any) -> None:
    refused = _raw(served.endpoint("acme", setup.agent_id), setup.token, "tools/call", CALL[0])
    assert refused.status_code == 400 and refused.json()["error"]["code"] == -32700  # read, found not JSON


@pytest.fixture
def three_per_minute(monkeypatch: Any) -> Any:
    cache.clear()
    monkeypatch.setattr(ScopedWindowThrottle, "THROTTLE_RATES", {"invoke": "3/min", "chat": "3/min", "test": "3/min"})
    yield
    cache.clear()


def test_a_spent_throttle_refuses_the_next_calls_from_their_headers(served: Any, setup: Any,
                                                                    three_per_minute: Any) -> None:
    url = served.endpoint("acme", setup.agent_id)
    assert _raw(url, setup.token, "tools/call", CALL[0]).status_code == 400  # not spent yet: the body is read

    async def scenario() -> tuple[list[Any], Any, Any]:
        async with client(url, setup.token, mode=MODERN) as connected:
            ok = [await connected.call_tool(*CALL) for _ in range(3)]
            errors = []
            for _ in range(2):  # the first refused by the throttle in the call, the second from its headers
                with pytest.raises(MCPError) as info:
                    await connected.call_tool(*CALL)
                errors.append(info.value.error)
            return ok, errors, await connected.list_tools()

    ok, errors, listed = asyncio.run(scenario())
    assert [r.is_error for r in ok] == [False, False, False]
    assert [e.data["code"] for e in errors] == ["throttled", "throttled"]
    assert all(0 < e.data["retry_after_s"] <= 60 for e in errors)
    assert listed.tools  # listing draws on no throttle
    early = _raw(url, setup.token, "tools/call", CALL[0])
    assert early.status_code == 429 and early.json()["error"]["data"]["code"] == "throttled"
    assert 0 < int(early.headers["retry-after"]) <= 60
    assert ToolCall.objects.filter(function="get_inventory").count() == 3
