"""A warm stateless (2026-07-28) streamable HTTP tools/call sent in the calling thread, on a kept-alive socket.

`SessionPool.call` runs in a worker thread; the SDK client (even as post.OnePost) runs on the pool's loop, so a call
costs two thread hand-offs and the loop's httpx machinery. A 2026-07-28 tools/call needs none of it: it is one POST
whose whole answer comes on that POST. So, when the session is warm and nothing but the call's own answer can come
back (no OAuth provider to ask, no progress callback, no resumed input round), the request is built exactly as
OnePost builds it (the session's stamp, its id counter), sent by rawwire's blocking client, and its answer read and
checked here as OnePost and `Connection._call_once` check it. What needs the loop goes there with what was received:
an `input_required` first answer (answered by the loop's input machinery, never sent twice), a header mismatch (the
server refused before running anything: the loop lists again and resends), a server request on the call's stream.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import mcp_types as types
import pydantic
from mcp.client.session import ClientSession
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher, handler_exception_to_error_data

from core.outbound import safe_url
from tools_app.runtime.errors import MalformedResult, ProtocolError, RemoteHTTPError, RuntimeToolError
from tools_app.runtime.mcp.call_result import (
    METHOD,
    claimed,
    fresh_id,
    output_checked,
    protocol_checked,
    stamped_params,
    with_meta,
)
from tools_app.runtime.mcp.discovery import to_tool_result
from tools_app.runtime.mcp.http import answered_in_jsonrpc, may_answer_in_jsonrpc, status_failure
from tools_app.runtime.mcp.post import _ServerRequestContext
from tools_app.runtime.mcp.rawwire import Endpoint, Exchange, NotSent, WireClosed
from tools_app.runtime.result import BUSINESS_ERROR, EXECUTION_ERROR, INVALID_PARAMS, TIMEOUT, ToolResult


class Connection(Protocol):
    """What of connection.Connection the raw path reads and sets (read from a worker thread: plain attributes)."""

    session: ClientSession | None
    last_used: float
    retired: bool
    broken: RuntimeToolError | None

    def redact(self, text: str) -> str: ...

    def _where(self) -> str: ...

ACCEPT = "application/json, text/event-stream"
# After its answer an SSE stream's end is read for at most this long, so its socket can be kept alive; a stream left
# open longer is closed (as the SDK closes it), costing only a new connection next time.
SSE_END_S = 0.05
# Connection.call's `first` for a call whose raw send the server refused as a header mismatch: list again, then send.
RELIST = object()
MAX_LOGS_PER_CALL = 50  # as connection.MAX_LOGS_PER_CALL


@dataclass
class HandOff:
    """The call goes on on the pool's loop: `first` is the input_required answer already received (kind "input"),
    or None for a header mismatch (kind "relist": the server refused before running the tool)."""

    kind: str
    first: Any = None
    logs: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Done:
    """The call's result; `retry_fresh`: it failed in a way that proves it never ran (as Connection.never_reached)."""

    result: ToolResult
    retry_fresh: bool = False


@dataclass
class _Answer:
    """What came back on the POST: a result, a JSON-RPC error, an HTTP failure, or nothing (closed)."""

    result: dict[str, Any] | None = None
    error: types.ErrorData | None = None
    failure: RuntimeToolError | None = None
    closed: str = ""
    # A redirect: the endpoint did not take the request. The loop's path sends it and handles the redirect as the SDK
    # does (followed within the origin, refused across origins), as it would have from the start.
    redirected: bool = False


class RawPost:
    """The blocking one-POST sender of one warm stateless streamable HTTP Connection (made when it opens)."""

    def __init__(self, conn: Connection, endpoint: Endpoint, protocol_version: str) -> None:
        self.conn = conn
        self.endpoint = endpoint
        self.protocol_version = protocol_version
        self._lock = threading.Lock()
        # Calls in flight here (the loop's Connection.inflight is the loop's own): the reaper reads both (busy).
        self.inflight = 0

    def close(self) -> None:
        self.endpoint.close()

    def call(self, function: str, arguments: dict[str, Any], timeout_s: float, loop: asyncio.AbstractEventLoop,
             retire: Callable[[], object]) -> Done | HandOff | None:
        """The call, or None when nothing was sent (the caller takes the async path)."""
        session = self.conn.session
        if session is None or function not in session._tool_output_schemas:
            return None  # an output schema not cached: the SDK would list first, on the loop
        dispatcher = session._dispatcher
        if not isinstance(dispatcher, JSONRPCDispatcher) or dispatcher._closed:
            return None
        with self._lock:
            self.inflight += 1
        try:
            return self._call(session, dispatcher, function, arguments, timeout_s, loop, retire)
        finally:
            with self._lock:
                self.inflight -= 1
            self.conn.last_used = time.monotonic()

    def _call(self, session: ClientSession, dispatcher: JSONRPCDispatcher, function: str, arguments: dict[str, Any],
              timeout_s: float, loop: asyncio.AbstractEventLoop, retire: Callable[[], object]) -> Done | HandOff | None:
        conn = self.conn
        conn.last_used = time.monotonic()
        body, headers = self._request(session, dispatcher, function, arguments)
        deadline = time.monotonic() + timeout_s
        logs: list[dict[str, Any]] = []
        try:
            exchange = self.endpoint.post(headers, body, deadline)
        except NotSent:
            return None
        except (WireClosed, TimeoutError):
            return self._broken(RemoteHTTPError(f"POST {safe_url(self.endpoint.url)} failed: WriteError"), retire)
        try:
            answer = self._read(exchange, logs, session, loop)
        except TimeoutError:
            exchange.finish()
            # The server may still be working on it; a fresh session is the only sure way to unwedge (as _call_once).
            conn.retired = True
            retire()
            return Done(ToolResult.fail(TIMEOUT, f"{conn._where()} call {function!r} timed out after {timeout_s:g} s"))
        except Exception as exc:  # noqa: BLE001 - sent: never sent again, and this connection is not trusted further
            exchange.finish()
            answer = _Answer(closed=f"Connection closed ({type(exc).__name__})")
        return self._outcome(session, function, answer, logs, retire)

    # ---- the request -------------------------------------------------------------------------------

    def _request(self, session: ClientSession, dispatcher: JSONRPCDispatcher, function: str,
                 arguments: dict[str, Any]) -> tuple[bytes, list[tuple[str, str]]]:
        """OnePost.call_tool's request, byte for byte: the session's stamp, its id counter, the transport's headers."""
        params, headers = stamped_params(session, function, arguments)
        with self._lock:  # one id space with the loop's requests; concurrent threads never share an id
            request_id = fresh_id(dispatcher)
        params = with_meta(params, request_id, progress=False)
        message = {"jsonrpc": "2.0", "id": request_id, "method": METHOD, "params": params}
        return _json(message), self._headers(headers)

    def _headers(self, extra: dict[str, str] | None) -> list[tuple[str, str]]:
        """StreamableHTTPTransport._prepare_headers, then the request's own (a dict update: a key keeps its place)."""
        headers = {"accept": ACCEPT, "content-type": "application/json",
                   MCP_PROTOCOL_VERSION_HEADER: self.protocol_version}
        if extra:
            headers.update(extra)
        return list(headers.items())

    # ---- the answer --------------------------------------------------------------------------------

    def _read(self, exchange: Exchange, logs: list[dict[str, Any]], session: ClientSession,
              loop: asyncio.AbstractEventLoop) -> _Answer:
        """The POST's answer as StreamableHTTPTransport._handle_post_request reads it (RecordingTransport's status
        check first); WireClosed before the head is a transport failure, after it the stream's end."""
        try:
            head = exchange.read_head()
        except WireClosed as exc:
            exchange.finish()
            name = "ReadError" if exc.args and exc.args[0] != "EOF" else "RemoteProtocolError"
            return _Answer(failure=RemoteHTTPError(f"POST {safe_url(self.endpoint.url)} failed: {name}"))
        try:
            answer = self._read_body(exchange, head.status, head.headers, logs, session, loop)
        except WireClosed:
            exchange.finish()
            return _Answer(closed="Connection closed")
        exchange.finish(SSE_END_S)
        return answer

    def _read_body(self, exchange: Exchange, status: int, headers: dict[str, str], logs: list[dict[str, Any]],
                   session: ClientSession, loop: asyncio.AbstractEventLoop) -> _Answer:
        content_type = headers.get("content-type", "").lower()
        if status >= 400 or 300 <= status < 400:
            return self._error_status(exchange, status, headers, content_type)
        if status == 202:
            return _Answer(error=types.ErrorData(code=types.INVALID_REQUEST,
                                                 message="server answered a request with 202 Accepted"))
        if content_type.startswith("application/json"):
            return _parsed_json(exchange.read_body())
        if content_type.startswith("text/event-stream"):
            return self._events(exchange, logs, session, loop)
        return _Answer(error=types.ErrorData(code=types.INVALID_REQUEST,
                                             message=f"Unexpected content type: {content_type}"))

    def _error_status(self, exchange: Exchange, status: int, headers: dict[str, str], content_type: str) -> _Answer:
        """A 4xx JSON-RPC error is the answer (a 2026 session's status mirrors its code); any other error status is
        the failure RecordingTransport records. A redirect goes to the loop's path (_Answer.redirected)."""
        if status < 400:
            return _Answer(redirected=True)
        if may_answer_in_jsonrpc(status, content_type):
            body = exchange.read_body()
            if answered_in_jsonrpc(body, modern=True):
                parsed = _parsed_json(body)
                if parsed.error is not None:
                    return parsed
        return _Answer(failure=status_failure("POST", self.endpoint.url, status, headers.get("www-authenticate", "")))

    def _events(self, exchange: Exchange, logs: list[dict[str, Any]], session: ClientSession,
                loop: asyncio.AbstractEventLoop) -> _Answer:
        """SSE until the first response (the SDK takes any response on the call's stream as the call's); a stream cut
        off is one that ended (the SDK's reconnection with Last-Event-ID is not attempted here)."""
        try:
            for message in _sse_messages(exchange.chunks()):
                if message is None:
                    return _Answer(error=types.ErrorData(code=types.PARSE_ERROR, message="Failed to parse SSE message"))
                if "result" in message or "error" in message:
                    return _parsed(message)
                method = message.get("method")
                if "id" in message and isinstance(method, str):
                    self._answer_server_request(message, session, loop, exchange.deadline)
                elif method == "notifications/message":
                    _log(logs, message.get("params"))
        except WireClosed:
            exchange.finish()
        return _Answer(closed="SSE stream ended without a response")

    def _answer_server_request(self, message: dict[str, Any], session: ClientSession,
                               loop: asyncio.AbstractEventLoop, deadline: float) -> None:
        """A request the server sends on the call's stream: the session's own handler answers it on the loop (as
        OnePost.answer_server_request), and the answer is POSTed back on another socket."""
        request = types.JSONRPCRequest.model_validate(message)
        reply: types.JSONRPCResponse | types.JSONRPCError
        try:
            result = asyncio.run_coroutine_threadsafe(
                session._on_request(_ServerRequestContext(request.id), request.method, request.params),  # type: ignore[arg-type]
                loop).result(max(deadline - time.monotonic(), 0.001))
            reply = types.JSONRPCResponse(jsonrpc="2.0", id=request.id, result=result)
        except TimeoutError:
            raise
        except Exception as exc:  # noqa: BLE001 - the dispatcher's boundary: a handler's failure is the answer
            error = handler_exception_to_error_data(exc) or types.ErrorData(code=0, message=str(exc))
            reply = types.JSONRPCError(jsonrpc="2.0", id=request.id, error=error)
        body = _json(reply.model_dump(by_alias=True, mode="json", exclude_unset=True))
        try:
            answered = self.endpoint.post(self._headers(None), body, deadline)
        except (NotSent, WireClosed):
            return  # the call's own answer (or the stream's end) tells what came of it
        try:
            answered.read_head()
            answered.finish(SSE_END_S)
        except WireClosed:
            answered.finish()

    # ---- the result --------------------------------------------------------------------------------

    def _outcome(self, session: ClientSession, function: str, answer: _Answer, logs: list[dict[str, Any]],
                 retire: Callable[[], object]) -> Done | HandOff | None:
        conn = self.conn
        if answer.redirected:
            return None
        if answer.failure is not None:
            done = self._broken(answer.failure, retire)
            with_logs(conn, done.result, logs)
            return done
        if answer.closed:
            error = ProtocolError(conn.redact(f"{conn._where()} failed: {answer.closed}"))
            conn.broken = error
            retire()
            out = ToolResult.fail(EXECUTION_ERROR, error.message, error_type=error.code)
        elif answer.error is not None:
            if answer.error.code == types.HEADER_MISMATCH:
                return HandOff("relist", logs=logs)
            out = self._error_result(answer.error)
        else:
            assert answer.result is not None
            try:
                result = _validated(session, function, answer.result)
            except (RuntimeError, pydantic.ValidationError) as exc:
                malformed = MalformedResult(conn.redact(
                    f"{conn._where()} returned a malformed result for {function!r}: {_brief(exc)}"))
                out = ToolResult.fail(EXECUTION_ERROR, malformed.message, error_type=malformed.code)
            else:
                if isinstance(result, types.InputRequiredResult):
                    return HandOff("input", first=result, logs=logs)
                out = to_tool_result(result)
                if out.error:
                    out.error = conn.redact(out.error)
        with_logs(conn, out, logs)
        return Done(out)

    def _error_result(self, error: types.ErrorData) -> ToolResult:
        """Connection._call_once's reading of an MCPError the server answered."""
        conn = self.conn
        if error.code == types.INVALID_PARAMS:
            return ToolResult.fail(INVALID_PARAMS, conn.redact(error.message))
        return ToolResult.fail(BUSINESS_ERROR,
                               conn.redact(f"{conn._where()} returned error {error.code}: {error.message}"),
                               jsonrpc_code=error.code)

    def _broken(self, failure: RuntimeToolError, retire: Callable[[], object]) -> Done:
        """A transport failure the async path records on the channel: the connection is broken and retired, and the
        pool tries once more on a fresh session when it proves the call never ran (Connection.never_reached)."""
        conn = self.conn
        conn.broken = failure
        retire()
        status = failure.details.get("status") if isinstance(failure, RemoteHTTPError) else None
        return Done(ToolResult.fail(failure.result_code, failure.message, error_type=failure.code),
                    retry_fresh=status in (400, 404))


def with_logs(conn: Connection, out: ToolResult, logs: list[dict[str, Any]]) -> None:
    """The server's log messages into meta["logs"], redacted as Connection.call does."""
    if logs:
        out.meta["logs"] = [
            {**entry, "data": conn.redact(entry["data"]) if isinstance(entry["data"], str) else entry["data"]}
            for entry in logs
        ] + list(out.meta.get("logs", []))


def _log(logs: list[dict[str, Any]], params: Any) -> None:
    """A notifications/message as Connection._on_log keeps it (after the SDK validated its params)."""
    try:
        parsed = types.LoggingMessageNotificationParams.model_validate(params)
    except pydantic.ValidationError:
        return
    if len(logs) < MAX_LOGS_PER_CALL:
        logs.append({"level": parsed.level, "logger": parsed.logger, "data": parsed.data})


def _json(message: Any) -> bytes:
    """httpx2's `json=` encoding."""
    return json.dumps(message, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")


def _parsed_json(body: bytes) -> _Answer:
    try:
        message = json.loads(body)
    except ValueError as exc:
        return _Answer(error=types.ErrorData(code=types.PARSE_ERROR, message=f"Failed to parse JSON response: {exc}"))
    return _parsed(message)


def _parsed(message: Any) -> _Answer:
    if isinstance(message, dict) and isinstance(message.get("result"), dict):
        return _Answer(result=message["result"])
    if isinstance(message, dict) and isinstance(message.get("error"), dict):
        try:
            return _Answer(error=types.ErrorData.model_validate(message["error"]))
        except pydantic.ValidationError:
            pass
    return _Answer(error=types.ErrorData(code=types.PARSE_ERROR, message="Failed to parse JSON response"))


def _sse_messages(chunks: Iterator[bytes]) -> Iterator[dict[str, Any] | None]:
    """The JSON-RPC messages of an SSE body's `message` events (None for one that does not parse)."""
    pending = b""
    event, data = "", []
    for chunk in chunks:
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for raw in lines:
            line = raw.rstrip(b"\r").decode("utf-8", errors="replace")
            if line:
                name, _, value = line.partition(":")
                value = value[1:] if value.startswith(" ") else value
                if name == "event":
                    event = value
                elif name == "data":
                    data.append(value)
                continue
            if data and event in ("", "message"):
                try:
                    message = json.loads("\n".join(data))
                    yield message if isinstance(message, dict) else None
                except ValueError:
                    yield None
            event, data = "", []


def _validated(session: ClientSession, name: str, raw: dict[str, Any]) -> Any:
    """OnePost's checks of a result (call_result.checked_result), without the loop: the tool's output schema is the
    session's cached one (RawPost.call only runs when it is cached)."""
    result = protocol_checked(session, raw)
    if isinstance(result, types.CallToolResult) and not result.is_error:
        output_checked(session, name, result)
    return claimed(result)


def _brief(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:300]
