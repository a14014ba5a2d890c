"""The streamable-HTTP transport with the answer's form chosen late: plain JSON unless there is something to stream.

The SDK's 2025-era transport commits every request POST to an SSE stream before the handler runs (so a
server-to-client request, an elicitation, can ride on it) or, with `json_response`, to one JSON body that
cannot carry any (no elicitation at all). Both are allowed by the spec, per response. This transport
waits for the first message the handler sends for the request: the response itself (nearly every call)
goes out as one `application/json` body; anything else (an elicitation request, a notification) or a
handler still silent after `STREAM_AFTER_S` opens the SSE stream exactly as the SDK does, with that
message first, so elicitation, progress and the keep-alive ping of long calls are unchanged. The SDK's
own 2026-era path decides the same way.

Why it matters: an SSE answer costs the server a task group of four tasks and the client an SSE parser
per call, several milliseconds on a busy two-CPU machine, and it sends the response headers while the
call is still running in a worker thread, where that send waits on the GIL.
"""

from __future__ import annotations

import asyncio
import json
import logging
from functools import partial
from http import HTTPStatus
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import pydantic_core
from anyio.streams.memory import MemoryObjectReceiveStream
from mcp.server._streamable_http_modern import _SSE_HEADERS, _SSE_PING_INTERVAL, _write, handle_modern_request
from mcp.server.streamable_http import (
    CONTENT_TYPE_SSE,
    MCP_SESSION_ID_HEADER,
    REQUEST_STREAM_BUFFER_SIZE,
    EventMessage,
    SSEEvent,
    StreamableHTTPServerTransport,
    check_accept_headers,
)
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp_types import (
    DEFAULT_NEGOTIATED_VERSION,
    INTERNAL_ERROR,
    LOG_LEVEL_META_KEY,
    JSONRPCError,
    JSONRPCRequest,
    JSONRPCResponse,
    jsonrpc_message_adapter,
)
from pydantic import ValidationError
from sse_starlette import EventSourceResponse
from starlette.requests import Request
from starlette.types import Message, Receive, Scope, Send

if TYPE_CHECKING:
    from mcp.server.lowlevel.server import Server

logger = logging.getLogger(__name__)

# A handler silent this long gets the SSE stream (and its keep-alive pings, for proxies' idle timeouts).
STREAM_AFTER_S = 5.0

Answer = JSONRPCResponse | JSONRPCError


class FastAnswers(Protocol):
    """The warm tools/call fast path (agents_app.gateway.fastcall): an answer, or None for the SDK's path."""

    async def legacy(self, message: JSONRPCRequest, request: Request, session_id: str) -> Answer | None: ...

    async def modern(self, security_settings: TransportSecuritySettings | None, scope: Scope, body: bytes
                     ) -> Answer | None: ...


_delivering: set[asyncio.Future[None]] = set()  # late fast-path answers on their way (kept from the collector)


class LateCommitTransport(StreamableHTTPServerTransport):
    """`StreamableHTTPServerTransport` answering a request POST with JSON when the handler has nothing to stream."""

    fast: FastAnswers | None = None  # set by the session manager

    async def _handle_post_request(self, scope: Scope, request: Request, receive: Receive, send: Send) -> None:
        writer = self._read_stream_writer
        if writer is None or self.is_json_response_enabled or self._event_store is not None:
            await super()._handle_post_request(scope, request, receive, send)
            return
        body = await request.body()  # Starlette keeps it: the SDK's path below reads it again for free
        try:
            message = jsonrpc_message_adapter.validate_python(pydantic_core.from_json(body), by_name=False)
        except (ValueError, ValidationError):
            message = None
        # Malformed bodies, notifications, responses and the session-opening initialize: the SDK's own path,
        # which also answers every refusal in its own order.
        if not isinstance(message, JSONRPCRequest) or message.method == "initialize":
            await super()._handle_post_request(scope, request, receive, send)
            return
        if not await self._validate_accept_header(request, scope, send):
            return
        if not self._check_content_type(request):
            await super()._handle_post_request(scope, request, receive, send)  # answers 415
            return
        if not await self._validate_request_headers(request, send):
            return
        protocol_version = request.headers.get(MCP_PROTOCOL_VERSION_HEADER, DEFAULT_NEGOTIATED_VERSION)
        # Every check above is the SDK's own; a warm plain tools/call is answered without the session's streams.
        if (self.fast is not None and self.mcp_session_id
                and await self._answered_fast(scope, request, receive, send, message, protocol_version)):
            return
        request_id = str(message.id)
        streams = anyio.create_memory_object_stream[EventMessage](REQUEST_STREAM_BUFFER_SIZE)
        self._request_streams[request_id] = streams
        reader = streams[1]
        handed_over = False
        try:
            await writer.send(self._create_session_message(message, request, request_id, protocol_version))
            first: EventMessage | None = None
            with anyio.move_on_after(STREAM_AFTER_S):
                first = await reader.receive()
            if first is not None and isinstance(first.message, JSONRPCResponse | JSONRPCError):
                await self._create_json_response(first.message)(scope, receive, send)
                return
            handed_over = True
            await self._stream(scope, receive, send, request_id, reader,
                               None if first is None else self._create_event_data(first))
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            # The session ended (DELETE, idle timeout) with this request in flight: as the SDK's JSON mode.
            response = self._create_error_response("Session terminated before the request completed",
                                                   HTTPStatus.INTERNAL_SERVER_ERROR, INTERNAL_ERROR)
            await response(scope, receive, send)
        except Exception as err:
            logger.exception("Error handling POST request")
            response = self._create_error_response("Error handling POST request", HTTPStatus.INTERNAL_SERVER_ERROR,
                                                   INTERNAL_ERROR)
            await response(scope, receive, send)
            await writer.send(Exception(err))
        finally:
            if not handed_over:
                await self._clean_up_memory_streams(request_id)

    async def _answered_fast(self, scope: Scope, request: Request, receive: Receive, send: Send,
                             message: JSONRPCRequest, protocol_version: str) -> bool:
        """The fast path's answer (gateway.fastcall): JSON when it comes within STREAM_AFTER_S, else the SSE stream
        with pings as for a silent handler, the answer its last event. False when the fast path declined at once."""
        assert self.fast is not None and self.mcp_session_id is not None
        answering = asyncio.ensure_future(self.fast.legacy(message, request, self.mcp_session_id))
        try:
            answered = await asyncio.wait_for(asyncio.shield(answering), STREAM_AFTER_S)
        except TimeoutError:
            await self._stream_late(scope, request, receive, send, message, protocol_version, answering)
            return True
        if answered is None:
            return False
        await self._create_json_response(answered)(scope, receive, send)
        return True

    async def _stream_late(self, scope: Scope, request: Request, receive: Receive, send: Send,
                           message: JSONRPCRequest, protocol_version: str,
                           answering: asyncio.Future[Answer | None]) -> None:
        request_id = str(message.id)
        streams = anyio.create_memory_object_stream[EventMessage](REQUEST_STREAM_BUFFER_SIZE)
        self._request_streams[request_id] = streams

        async def deliver() -> None:
            try:
                answered = await answering
            except Exception:  # a bug: the fast path maps every failure of the call to its JSON-RPC error
                logger.exception("gateway: the fast path failed after its stream started")
                await streams[0].aclose()  # the stream ends, unanswered, rather than wait forever
                return
            try:
                if answered is not None:
                    await streams[0].send(EventMessage(answered))
                elif self._read_stream_writer is not None:  # declined late: the session answers on this stream
                    await self._read_stream_writer.send(
                        self._create_session_message(message, request, request_id, protocol_version))
            except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
                logger.info("gateway: a late fast-path answer found its stream closed")

        delivering = asyncio.ensure_future(deliver())
        _delivering.add(delivering)
        delivering.add_done_callback(_delivering.discard)
        await self._stream(scope, receive, send, request_id, streams[1], None)

    async def _stream(self, scope: Scope, receive: Receive, send: Send, request_id: str,
                      reader: MemoryObjectReceiveStream[EventMessage], first: SSEEvent | None) -> None:
        """The SDK's SSE answer for a request already dispatched, `first` sent ahead of the rest."""
        sse_writer, sse_reader = anyio.create_memory_object_stream[SSEEvent](0)
        self._sse_stream_writers[request_id] = sse_writer
        headers = {
            "Cache-Control": "no-cache, no-transform",
            "Connection": "keep-alive",
            "Content-Type": CONTENT_TYPE_SSE,
            **({MCP_SESSION_ID_HEADER: self.mcp_session_id} if self.mcp_session_id else {}),
        }
        # _run_sse_writer sends its "priming" event first, then forwards the request's stream until the
        # response, and cleans the request's streams up however it ends.
        response = EventSourceResponse(
            content=sse_reader,
            data_sender_callable=partial(self._run_sse_writer, request_id, sse_writer, reader, first),
            headers=headers,
        )
        try:
            await response(scope, receive, send)
        except Exception:
            logger.exception("SSE response error")
            await sse_writer.aclose()
            await self._clean_up_memory_streams(request_id)
        finally:
            await sse_reader.aclose()


# --- the 2026-07-28 entry: a request with nothing to stream answered without a stream's machinery -----------------
#
# The SDK's modern entry (mcp.server._streamable_http_modern.handle_modern_request) in SSE mode runs every request's
# handler in a task group beside a task watching for the client's disconnect, over a memory stream, and answers
# JSON when the handler finished within `_SSE_PING_INTERVAL` without emitting (nearly every call): ~0.15 ms of CPU a
# request for the task group, its two tasks, the stream and the cancel scopes. A request that cannot emit anything
# (no progressToken, no log level asked for, a method that answers once) runs the SDK's own JSON-mode path instead,
# in the request's task: the same ladder, the same `serve_one`, the same JSON body and status. What SSE mode adds
# for such a request is kept: a handler still silent after `_SSE_PING_INTERVAL` commits `text/event-stream` with
# the same keep-alive pings, and its answer is the stream's last event, byte for byte as the SDK frames it.
# Everything else (progress, logging, subscriptions/listen, a client that does not accept SSE, a GET) goes to the
# SDK's entry unchanged.

_ANSWERS_ONCE = frozenset({"tools/call", "tools/list", "prompts/list", "prompts/get", "resources/list",
                           "resources/read", "resources/templates/list", "server/discover", "ping",
                           "completion/complete"})
_PING = b": ping\r\n\r\n"


def _emits_nothing(body: bytes) -> bool:
    """A request whose handler has nothing to send before its answer: a method answered once, without a
    progressToken or a log level in its `_meta` (what a 2026 request opts into notifications with)."""
    try:
        decoded = json.loads(body)
    except (ValueError, RecursionError):
        return False  # the SDK's entry answers the parse error
    if not isinstance(decoded, dict) or "id" not in decoded or decoded.get("method") not in _ANSWERS_ONCE:
        return False
    params = decoded.get("params")
    if params is None:
        return True
    if not isinstance(params, dict):
        return False
    meta = params.get("_meta")
    return meta is None or (isinstance(meta, dict) and "progressToken" not in meta and LOG_LEVEL_META_KEY not in meta)


async def _body(receive: Receive) -> tuple[bytes, list[Message]]:
    """The request's body and the messages it came in, to be handed out again as they came (`_whole`: all of it came;
    not when the client went away first)."""
    messages: list[Message] = []
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request" or not message.get("more_body"):
            return b"".join(m.get("body", b"") for m in messages if m["type"] == "http.request"), messages


def _whole(messages: list[Message]) -> bool:
    last = messages[-1] if messages else None
    return last is not None and last["type"] == "http.request" and not last.get("more_body")


def _replaying(messages: list[Message], receive: Receive) -> Receive:
    """`receive` with the messages already read handed out first, in their order."""
    pending = list(reversed(messages))

    async def replay() -> Message:
        return pending.pop() if pending else await receive()

    return replay


class _LateStream:
    """The `send` of a JSON-mode answer that turns into an SSE stream if the handler stays silent too long."""

    def __init__(self, send: Send, after_s: float) -> None:
        self._send = send
        self._stop = asyncio.Event()
        self._streaming = False
        self._pinger: asyncio.Task[None] | None = None
        self._timer = asyncio.get_running_loop().call_later(after_s, self._start)

    def _start(self) -> None:
        self._pinger = asyncio.ensure_future(self._ping())

    async def _ping(self) -> None:
        """As the SDK's SSE mode: the stream's headers and a ping at once, then a ping every interval."""
        if self._stop.is_set():
            return
        self._streaming = True
        await self._send({"type": "http.response.start", "status": 200, "headers": _SSE_HEADERS})
        while True:
            await self._send({"type": "http.response.body", "body": _PING, "more_body": True})
            try:
                await asyncio.wait_for(self._stop.wait(), _SSE_PING_INTERVAL)
                return
            except TimeoutError:
                continue

    async def stop(self) -> None:
        """No more pings; the current one, if any, is sent whole first."""
        self._timer.cancel()
        self._stop.set()
        if self._pinger is not None:
            await asyncio.shield(self._pinger)

    async def __call__(self, message: Message) -> None:
        await self.stop()
        if not self._streaming:
            await self._send(message)
            return
        if message["type"] == "http.response.body":
            # The JSON body is the answer's JSON-RPC message as the SDK frames an SSE event (same dump, same
            # separators): the stream's last event.
            await self._send({"type": "http.response.body", "body": b"event: message\r\ndata: " +
                              bytes(message.get("body", b"")) + b"\r\n\r\n", "more_body": False})
        # (the JSON answer's own http.response.start: the stream's headers went out already)


async def handle_modern(app: Server[Any], security_settings: TransportSecuritySettings | None, json_response: bool,
                        lifespan_state: Any, scope: Scope, receive: Receive, send: Send,
                        fast: FastAnswers | None = None) -> None:
    """The SDK's 2026-07-28 entry, with a request that has nothing to stream answered in JSON mode (above), and a
    warm plain tools/call by the fast path (`fast`) when it takes it."""
    if json_response or scope.get("method") != "POST":
        await handle_modern_request(app, security_settings, json_response, lifespan_state, scope, receive, send)
        return
    has_json, has_sse = check_accept_headers(Request(scope))
    body, messages = await _body(receive)
    receive = _replaying(messages, receive)
    if not (_whole(messages) and has_json and has_sse and _emits_nothing(body)):
        await handle_modern_request(app, security_settings, json_response, lifespan_state, scope, receive, send)
        return
    late = _LateStream(send, _SSE_PING_INTERVAL)
    try:
        answered = None if fast is None else await fast.modern(security_settings, scope, body)
        if answered is not None:
            await _write(answered, scope, receive, late)  # the SDK's JSON answer and status (or the stream's last event)
            return
        await handle_modern_request(app, security_settings, True, lifespan_state, scope, receive, late)
    finally:
        await late.stop()
