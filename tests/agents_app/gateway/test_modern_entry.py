"""The 2026-07-28 entry's JSON-mode path for requests with nothing to stream (gateway.transport.handle_modern): which
requests take it, and the keep-alive stream it still commits to for a handler silent past the ping interval, framed
byte for byte as the SDK's SSE mode frames its last event."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from mcp.server._streamable_http_modern import _SSE_HEADERS, _sse_event
from mcp_types import LOG_LEVEL_META_KEY, JSONRPCResponse
from starlette.types import Message

from agents_app.gateway.transport import _body, _emits_nothing, _LateStream, _replaying, _whole


def _request(method: str, meta: dict[str, Any] | None = None, **params: Any) -> bytes:
    envelope: dict[str, Any] = {"jsonrpc": "2.0", "id": 3, "method": method,
                                "params": {**params, **({"_meta": meta} if meta is not None else {})}}
    return json.dumps(envelope).encode()


@pytest.mark.parametrize(("body", "quiet"), [
    (_request("tools/call", {}, name="t", arguments={}), True),
    (_request("tools/list", {}), True),
    (_request("tools/call", {"progressToken": 1}, name="t"), False),  # progress rides the stream
    (_request("tools/call", {LOG_LEVEL_META_KEY: "debug"}, name="t"), False),  # so do the log messages asked for
    (_request("subscriptions/listen", {}), False),  # a stream by nature
    (b'{"jsonrpc": "2.0", "method": "notifications/cancelled"}', False),  # no id: the SDK acknowledges it
    (b'[{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}]', False),  # a batch: the SDK refuses it
    (b"{not json", False),
    (_request("tools/call", None, name="t").replace(b'"params": {"name": "t"}', b'"params": 5'), False),
])
def test_which_requests_have_nothing_to_stream(body: bytes, quiet: bool) -> None:
    assert _emits_nothing(body) is quiet


class _Wire:
    def __init__(self) -> None:
        self.sent: list[Message] = []

    async def __call__(self, message: Message) -> None:
        self.sent.append(message)


ANSWER = JSONRPCResponse(jsonrpc="2.0", id=3, result={"content": [], "isError": False})
JSON_BODY = json.dumps(ANSWER.model_dump(mode="json", by_alias=True, exclude_none=True), separators=(",", ":")).encode()
JSON_START = {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]}


def test_an_answer_before_the_interval_is_the_json_answer_unchanged() -> None:
    async def scenario() -> list[Message]:
        wire = _Wire()
        late = _LateStream(wire, 60)
        await late(JSON_START)
        await late({"type": "http.response.body", "body": JSON_BODY})
        await late.stop()
        return wire.sent

    assert asyncio.run(scenario()) == [JSON_START, {"type": "http.response.body", "body": JSON_BODY}]


def test_a_silent_handler_gets_the_stream_and_its_answer_is_the_last_event_as_the_sdk_frames_it() -> None:
    async def scenario() -> list[Message]:
        wire = _Wire()
        late = _LateStream(wire, 60)
        late._start()  # the interval ran out (the timer's callback)
        while len(wire.sent) < 2:
            await asyncio.sleep(0)
        await late(JSON_START)
        await late({"type": "http.response.body", "body": JSON_BODY})
        return wire.sent

    sent = asyncio.run(scenario())
    assert sent[0] == {"type": "http.response.start", "status": 200, "headers": _SSE_HEADERS}
    assert sent[1] == {"type": "http.response.body", "body": b": ping\r\n\r\n", "more_body": True}
    assert sent[2:] == [{"type": "http.response.body", "body": _sse_event(ANSWER), "more_body": False}]


def test_an_answer_racing_the_timer_stays_json() -> None:
    async def scenario() -> list[Message]:
        wire = _Wire()
        late = _LateStream(wire, 60)
        late._start()  # fired, but the answer comes before the pinger ran
        await late(JSON_START)
        await late({"type": "http.response.body", "body": JSON_BODY})
        return wire.sent

    assert asyncio.run(scenario()) == [JSON_START, {"type": "http.response.body", "body": JSON_BODY}]


def test_the_body_read_ahead_is_handed_out_again_as_it_came() -> None:
    async def scenario(arrivals: list[Message]) -> tuple[bytes, bool, list[Any]]:
        queue = list(arrivals)

        async def receive() -> Message:
            return queue.pop(0) if queue else {"type": "http.disconnect"}

        body, messages = await _body(receive)
        replay = _replaying(messages, receive)
        return body, _whole(messages), [await replay() for _ in range(len(arrivals) + 1)]

    parts: list[Message] = [{"type": "http.request", "body": b'{"a"', "more_body": True},
             {"type": "http.request", "body": b": 1}", "more_body": False}]
    body, whole, replayed = asyncio.run(scenario(parts))
    assert (body, whole) == (b'{"a": 1}', True)
    assert replayed == [*parts, {"type": "http.disconnect"}]
    # A client gone before the end: not whole, and the disconnect is handed out again for the SDK to see.
    cut: list[Message] = [parts[0], {"type": "http.disconnect"}]
    body, whole, replayed = asyncio.run(scenario(cut))
    assert not whole and replayed[:2] == cut
