"""The warm tools/call fast path (agents_app.gateway.fastcall): taken for a plain call of either era, not taken when
the call could need an approval, progress or an input request, and answering what the SDK's path answers."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import mcp_types as types
import pytest
from django.core.cache import cache
from django.test import override_settings
from mcp.shared.exceptions import MCPError

from agents_app.gateway import calls, fastcall, routing, server, transport
from core.throttle import ScopedWindowThrottle
from tenants_app.models import Role
from tenants_app.services import token_for_user
from tests.agents_app.gateway.modern import MODERN, client
from tools_app.models import ToolCall

pytestmark = pytest.mark.django_db(transaction=True)
CALL = ("inventory__get_inventory", {"sku": "DEMO-001"})
ERAS = ("legacy", MODERN)


class Paths:
    """What each call took: `fast` jobs the fast path ran (None: it stepped aside), `sdk` SDK handler entries."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.fast: list[Any] = []
        self.sdk: list[int] = []
        job, requests = fastcall._job, server._client_requests

        def counted_job(*args: Any, **kwargs: Any) -> Any:
            ran = job(*args, **kwargs)
            self.fast.append(ran)
            return ran

        def counted_requests(*args: Any, **kwargs: Any) -> Any:
            self.sdk.append(1)  # only the SDK path's call_tool asks what the client may be asked
            return requests(*args, **kwargs)

        monkeypatch.setattr(fastcall, "_job", counted_job)
        monkeypatch.setattr(server, "_client_requests", counted_requests)

    @property
    def answered_fast(self) -> int:
        return sum(1 for ran in self.fast if ran is not None)


async def _session(url: str, token: str, mode: str, body: Callable[[Any], Any], **kw: Any) -> Any:
    async with client(url, token, mode=mode, **kw) as connected:
        await connected.list_tools()
        return await body(connected)


def _run(url: str, token: str, mode: str, body: Callable[[Any], Any], **kw: Any) -> Any:
    return asyncio.run(_session(url, token, mode, body, **kw))


async def _outcome(connected: Any, name: str, arguments: dict[str, Any]) -> Any:
    """A call's answer as data: the result's fields, or the JSON-RPC error's."""
    try:
        result = await connected.call_tool(name, arguments)
    except MCPError as exc:
        return {"error": exc.error.model_dump()}
    return result.model_dump(by_alias=True, exclude_none=True)


@pytest.mark.parametrize("mode", ERAS)
def test_a_plain_warm_call_takes_the_fast_path(served: Any, setup: Any, mode: str,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    paths = Paths(monkeypatch)

    async def calls(connected: Any) -> list[Any]:
        return [await connected.call_tool(*CALL) for _ in range(3)]

    results = _run(served.endpoint("acme", setup.agent_id), setup.token, mode, calls)
    assert all(not r.is_error and r.structured_content["sku"] == "DEMO-001" for r in results)
    assert paths.answered_fast == 3 and paths.sdk == []  # the SDK's tools/call handler was never entered
    assert ToolCall.objects.filter(via="gateway", status="ok").count() == 3  # each call audited once


@pytest.mark.parametrize("mode", ERAS)
def test_a_fast_call_reads_the_callers_flag_once(served: Any, setup: Any, mode: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The fast path reads `after_flagged` before it counts anything (to step aside for a call that could be held);
    the same worker job does not read it again (calls._call_function is told: `unflagged`)."""
    paths = Paths(monkeypatch)
    reads: list[bool] = []
    real = calls.after_flagged

    def counted(principal: Any) -> bool:
        reads.append(real(principal))
        return reads[-1]

    monkeypatch.setattr(fastcall, "after_flagged", counted)
    monkeypatch.setattr(calls, "after_flagged", counted)

    async def twice(connected: Any) -> list[Any]:
        return [await connected.call_tool(*CALL) for _ in range(2)]

    results = _run(served.endpoint("acme", setup.agent_id), setup.token, mode, twice)
    assert all(not r.is_error for r in results) and paths.answered_fast == 2
    assert reads == [False, False]  # once per call, not twice


@pytest.mark.parametrize("mode", ERAS)
def test_a_flagged_callers_write_is_held_on_the_sdk_path(served: Any, setup: Any, mode: str,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A caller marked by a flagged result (the tenant's approve_after_flagged_result on): the fast path steps aside
    before counting anything and the SDK's path holds the consequential call for a person, as before."""
    setup.tenant.approve_after_flagged_result = True
    setup.tenant.save(update_fields=["approve_after_flagged_result"])
    user = setup.api.user
    cache.set(f"toolhub:gw-flagged:{setup.tenant.pk}:{user.pk}:{setup.agent_id}", 1, 60)
    paths = Paths(monkeypatch)

    async def call(connected: Any) -> Any:
        return await connected.call_tool(*CALL)

    held = _run(served.endpoint("acme", setup.agent_id), setup.token, mode, call)
    assert held.is_error and "APPROVAL_REQUIRED" in held.content[0].text
    assert paths.fast == [None] and len(paths.sdk) == 1
    assert ToolCall.objects.count() == 1 and not ToolCall.objects.filter(status="ok").exists()


@pytest.mark.parametrize("mode", ERAS)
def test_turned_off_every_call_takes_the_sdk_path(served: Any, setup: Any, mode: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    paths = Paths(monkeypatch)

    async def calls(connected: Any) -> list[Any]:
        return [await connected.call_tool(*CALL) for _ in range(2)]

    with override_settings(TOOLHUB_MCP_FASTCALL=False):
        results = _run(served.endpoint("acme", setup.agent_id), setup.token, mode, calls)
    assert all(not r.is_error for r in results)
    assert paths.fast == [] and len(paths.sdk) == 2


@pytest.mark.parametrize("mode", ERAS)
def test_a_call_that_needs_approval_is_left_to_the_sdk_path(served: Any, setup: Any, mode: str,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    resp = setup.api.patch(f"/api/v1/tools/{setup.tool_id}/functions/get_inventory/", {"requires_approval": True},
                           format="json")
    assert resp.status_code == 200, resp.content
    paths = Paths(monkeypatch)

    async def call(connected: Any) -> Any:
        return await connected.call_tool(*CALL)

    held = _run(served.endpoint("acme", setup.agent_id), setup.token, mode, call)
    assert held.is_error and "APPROVAL_REQUIRED" in held.content[0].text
    assert paths.fast == [None] and len(paths.sdk) == 1  # stepped aside before counting anything; the SDK held it
    assert ToolCall.objects.count() == 1  # one held request, not two


@pytest.mark.parametrize("mode", ERAS)
def test_a_call_with_a_progress_token_is_left_to_the_sdk_path(served: Any, setup: Any, mode: str,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    paths = Paths(monkeypatch)

    async def noted(progress: float, total: float | None, message: str | None) -> None:
        return None

    async def call(connected: Any) -> Any:
        return await connected.call_tool(*CALL, progress_callback=noted)

    result = _run(served.endpoint("acme", setup.agent_id), setup.token, mode, call)
    assert not result.is_error
    assert paths.fast == [] and len(paths.sdk) == 1


@pytest.mark.parametrize("mode", ERAS)
def test_a_client_that_may_be_asked_is_left_to_the_sdk_path(served: Any, setup: Any, mode: str,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    paths = Paths(monkeypatch)

    async def answer(context: Any, params: Any) -> types.ElicitResult:
        return types.ElicitResult(action="decline")

    async def call(connected: Any) -> Any:
        return await connected.call_tool(*CALL)

    result = _run(served.endpoint("acme", setup.agent_id), setup.token, mode, call, elicitation_callback=answer)
    assert not result.is_error
    assert paths.fast == [] and paths.sdk  # (a 2026 call that may be asked relays: it asks twice)


def _both_paths(url: str, token: str, mode: str, name: str, arguments: dict[str, Any],
                between: Callable[[], None] | None = None) -> tuple[Any, Any]:
    """The same call answered by the fast path, then by the SDK's path (the setting off), on one session."""

    async def body(connected: Any) -> tuple[Any, Any]:
        fast = await _outcome(connected, name, arguments)
        if between is not None:
            between()
        with override_settings(TOOLHUB_MCP_FASTCALL=False):
            sdk = await _outcome(connected, name, arguments)
        return fast, sdk

    return _run(url, token, mode, body)


def _same(fast: Any, sdk: Any) -> None:
    assert fast == sdk
    assert fast  # something was compared


@pytest.mark.parametrize("mode", ERAS)
@pytest.mark.parametrize(("name", "arguments", "is_error"), [
    (CALL[0], CALL[1], False),  # success, structured
    ("inventory__fail", {"reason": "sold out"}, True),  # the server's own isError result
    ("inventory__no_such_function", {}, True),  # Toolhub's unknown tool
    (CALL[0], {"sku": 5, "extra": True}, True),  # arguments the schema refuses
], ids=["success", "tool-error", "unknown-tool", "bad-arguments"])
def test_the_fast_answer_is_the_sdk_paths(served: Any, setup: Any, mode: str, name: str,
                                          arguments: dict[str, Any], is_error: bool,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    paths = Paths(monkeypatch)
    fast, sdk = _both_paths(served.endpoint("acme", setup.agent_id), setup.token, mode, name, arguments)
    _same(fast, sdk)
    assert fast.get("isError", False) is is_error
    assert paths.answered_fast == 1 and len(paths.sdk) == 1


@pytest.mark.parametrize("mode", ERAS)
def test_a_viewers_refusal_is_the_sdk_paths(served: Any, setup: Any, member_client: Any, mode: str,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    viewer = member_client(setup.tenant, Role.VIEWER)
    paths = Paths(monkeypatch)
    fast, sdk = _both_paths(served.endpoint("acme", setup.agent_id), token_for_user(user=viewer.user), mode, *CALL)
    _same(fast, sdk)
    if mode == MODERN:  # refused from its Mcp-Method header before either path (gateway.routing)
        assert fast["error"]["data"]["code"] == "permission_denied" and paths.fast == []
    else:
        assert fast["_meta"]["toolhub/refusal"]["error_reason"] == "viewer_may_not_call"
        assert paths.answered_fast == 1
    assert not ToolCall.objects.filter(status="ok").exists()


@pytest.mark.parametrize("mode", ERAS)
def test_a_throttled_call_is_refused_as_on_the_sdk_path(served: Any, setup: Any, mode: str,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    cache.clear()
    monkeypatch.setattr(ScopedWindowThrottle, "THROTTLE_RATES", {"invoke": "1/min", "chat": "1/min", "test": "1/min"})
    paths = Paths(monkeypatch)

    def spent_again() -> None:  # the SDK's path sees the throttle spent as the fast path did, not from headers
        routing._spent.clear()

    async def body(connected: Any) -> tuple[Any, Any, Any]:
        first = await _outcome(connected, *CALL)
        fast = await _outcome(connected, *CALL)
        spent_again()
        with override_settings(TOOLHUB_MCP_FASTCALL=False):
            sdk = await _outcome(connected, *CALL)
        return first, fast, sdk

    try:
        first, fast, sdk = _run(served.endpoint("acme", setup.agent_id), setup.token, mode, body)
    finally:
        routing._spent.clear()
        cache.clear()
    assert not first.get("isError")
    for refused in (fast, sdk):
        assert 0 < refused["error"]["data"].pop("retry_after_s") <= 60  # the seconds left move between the two
        refused["error"]["message"] = refused["error"]["message"].rsplit(" in ", 1)[0]
    _same(fast, sdk)
    assert fast["error"]["data"]["code"] == "throttled"
    assert paths.answered_fast == 1 and len(paths.sdk) == 1  # (the first call ran fast, the refusal raised in it)


@pytest.mark.parametrize("mode", ERAS)
def test_a_fast_call_silent_past_the_stream_delay_is_answered_on_the_stream(served: Any, setup: Any, mode: str,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """As on the SDK's path, a call still running after the delay gets the SSE stream (keep-alive pings), the
    answer its last event."""
    monkeypatch.setattr(transport, "STREAM_AFTER_S", 0.2)  # 2025 (LateCommitTransport)
    monkeypatch.setattr(transport, "_SSE_PING_INTERVAL", 0.2)  # 2026 (handle_modern)
    paths = Paths(monkeypatch)

    async def call(connected: Any) -> Any:
        return await connected.call_tool("inventory__slow", {"seconds": 1})

    result = _run(served.endpoint("acme", setup.agent_id), setup.token, mode, call)
    assert not result.is_error, result
    assert paths.answered_fast == 1 and paths.sdk == []
