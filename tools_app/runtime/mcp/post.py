"""A 2026-07-28 tools/call over streamable HTTP as one POST on the session's own HTTP client.

The SDK's ClientSession sends each request through its dispatcher: memory streams both ways, a task per POST, a task
per notification, an OpenTelemetry span. On a warm stateless (2026) session that machinery is most of the pool loop's
CPU per call, and none of it is needed: a 2026 request has no session state and its whole answer comes on its own
POST. So the request is built exactly as the SDK builds it (the session's own stamp: `_meta` with protocol version,
client info and capabilities, log level; MCP-Protocol-Version, Mcp-Method, Mcp-Name, Mcp-Param-* headers; the
dispatcher's id counter, progressToken = id), sent and read by the SDK transport's own POST handling (status codes,
JSON and SSE answers, reconnection), and what comes back goes to the session's own handlers inline (progress,
log messages, a server request) and is validated as `ClientSession.call_tool` validates it.
"""

from __future__ import annotations

from typing import Any

import anyio
import httpx2
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.streamable_http import RequestContext, StreamableHTTPTransport
from mcp.shared.dispatcher import coerce_request_id
from mcp.shared.exceptions import MCPError
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher, handler_exception_to_error_data
from mcp.shared.message import ClientMessageMetadata, SessionMessage

from tools_app.runtime.mcp.call_result import METHOD, checked_result, fresh_id, stamped_params, with_meta
from tools_app.runtime.mcp.http import HttpChannel


class _ServerRequestContext:
    """What ClientSession._on_request reads of the dispatcher's context: the server request's id."""

    def __init__(self, request_id: types.RequestId) -> None:
        self.request_id = request_id


class _Answer:
    """The read side of one POST: the transport writes each message it parses here (the SDK's read stream)."""

    def __init__(self, post: OnePost, session: ClientSession, request_id: int, progress: Any) -> None:
        self.post = post
        self.session = session
        self.request_id = request_id
        self.progress = progress
        self.outcome: dict[str, Any] | types.ErrorData | None = None

    async def send(self, item: SessionMessage | Exception) -> None:
        if isinstance(item, Exception):
            return  # the SDK hands a stream fault to message_handler, which Toolhub leaves at the SDK's no-op
        message = item.message
        if isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
            # As the dispatcher: the first answer to this id counts; an answer to another id is dropped.
            if self.outcome is None and message.id is not None and coerce_request_id(message.id) == self.request_id:
                self.outcome = message.result if isinstance(message, types.JSONRPCResponse) else message.error
        elif isinstance(message, types.JSONRPCNotification):
            await self._notified(message)
        else:
            await self.post.answer_server_request(self.session, message, self)

    async def _notified(self, message: types.JSONRPCNotification) -> None:
        """The dispatcher's notification path, inline: progress for this call to its callback, then the session's
        own handler (log messages to Connection._on_log); the SDK runs each in a task of its own."""
        params = message.params
        if message.method == "notifications/progress" and self.progress is not None and isinstance(params, dict):
            token, progress = params.get("progressToken"), params.get("progress")
            if (isinstance(token, str | int) and not isinstance(token, bool) and isinstance(progress, int | float)
                    and not isinstance(progress, bool) and coerce_request_id(token) == self.request_id):
                total, text = params.get("total"), params.get("message")
                await self.progress(float(progress), float(total) if isinstance(total, int | float) else None,
                                    text if isinstance(text, str) else None)
        if self.session._intercept_notification(message.method, params):
            return
        try:
            await self.session._on_notify(None, message.method, params)  # type: ignore[arg-type]  # reads no context
        except Exception:  # noqa: BLE001 - as the dispatcher's _contained_notify: a handler's failure is not the call's
            pass


class OnePost:
    """tools/call of one stateless (2026-07-28) streamable HTTP session, each as a single POST."""

    def __init__(self, client: httpx2.AsyncClient, url: str, channel: HttpChannel, protocol_version: str) -> None:
        self.client = client
        self.channel = channel
        # The SDK transport's own POST handling, in the state a stateless session's transport is in: no session id,
        # the negotiated revision as the cached MCP-Protocol-Version (for a reconnection's GET).
        self.transport = StreamableHTTPTransport(url)
        self.transport._protocol_version_header = protocol_version

    async def call_tool(self, session: ClientSession, name: str, arguments: dict[str, Any], progress: Any,
                        input_responses: types.InputResponses | None, request_state: str | None) -> Any:
        """`session.call_tool(name, arguments, progress_callback=progress, input_responses=..., request_state=...,
        allow_input_required=True)`, the same request on the wire and the same result or error back."""
        dispatcher = session._dispatcher
        if not isinstance(dispatcher, JSONRPCDispatcher):
            raise TypeError("the one-POST path needs the session's JSON-RPC dispatcher")
        if dispatcher._closed:
            raise MCPError(code=types.CONNECTION_CLOSED, message="Connection closed")
        params, headers = stamped_params(session, name, arguments, input_responses, request_state)
        request_id = fresh_id(dispatcher)
        request = types.JSONRPCRequest(jsonrpc="2.0", id=request_id, method=METHOD,
                                       params=with_meta(params, request_id, progress is not None))
        answer = _Answer(self, session, request_id, progress)
        await self._post(SessionMessage(request), ClientMessageMetadata(headers=headers) if headers else None, answer)
        outcome = answer.outcome
        while outcome is None:
            # No answer to this id on the POST: the SDK's waiter would wait on; so does this (the call's timeout ends it).
            await anyio.sleep_forever()
        return await checked_result(session, name, outcome)

    async def _post(self, message: SessionMessage, metadata: ClientMessageMetadata | None, answer: _Answer) -> None:
        ctx = RequestContext(client=self.client, session_id=self.transport.session_id, session_message=message,
                             metadata=metadata, read_stream_writer=answer)  # type: ignore[arg-type]  # has send()
        try:
            await self.transport._handle_post_request(ctx)
        except Exception as exc:  # in the SDK this ends the transport's task group, so the session
            # The failure the transport recorded is what the SDK path reports (HttpChannel.record cancels the call);
            # otherwise the dispatcher's waiters are woken with CONNECTION_CLOSED as the session closes.
            if self.channel.failure is not None:
                raise self.channel.failure from None
            raise MCPError(code=types.CONNECTION_CLOSED, message="Connection closed") from exc

    async def answer_server_request(self, session: ClientSession, request: types.JSONRPCRequest,
                                    answer: _Answer) -> None:
        """A request the server sends on the call's stream, answered by the session's own handler and POSTed back
        as the dispatcher answers it (awaited here, where the SDK answers in a task of its own)."""
        reply: types.JSONRPCResponse | types.JSONRPCError
        try:
            result = await session._on_request(_ServerRequestContext(request.id),  # type: ignore[arg-type]
                                               request.method, request.params)
            reply = types.JSONRPCResponse(jsonrpc="2.0", id=request.id, result=result)
        except Exception as exc:  # noqa: BLE001 - the dispatcher's boundary: a handler's failure is the answer
            error = handler_exception_to_error_data(exc) or types.ErrorData(code=0, message=str(exc))
            reply = types.JSONRPCError(jsonrpc="2.0", id=request.id, error=error)
        await self._post(SessionMessage(reply), None, answer)
