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

import logging
from functools import partial
from http import HTTPStatus

import anyio
import pydantic_core
from anyio.streams.memory import MemoryObjectReceiveStream
from mcp.server.streamable_http import (
    CONTENT_TYPE_SSE,
    MCP_SESSION_ID_HEADER,
    REQUEST_STREAM_BUFFER_SIZE,
    EventMessage,
    SSEEvent,
    StreamableHTTPServerTransport,
)
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp_types import (
    DEFAULT_NEGOTIATED_VERSION,
    INTERNAL_ERROR,
    JSONRPCError,
    JSONRPCRequest,
    JSONRPCResponse,
    jsonrpc_message_adapter,
)
from pydantic import ValidationError
from sse_starlette import EventSourceResponse
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

logger = logging.getLogger(__name__)

# A handler silent this long gets the SSE stream (and its keep-alive pings, for proxies' idle timeouts).
STREAM_AFTER_S = 5.0


class LateCommitTransport(StreamableHTTPServerTransport):
    """`StreamableHTTPServerTransport` answering a request POST with JSON when the handler has nothing to stream."""

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
