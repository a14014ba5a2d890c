"""A tools/call over stdio as one line written and its answer taken from the reader, past the SDK's dispatcher.

The SDK's ClientSession sends each request through its dispatcher: a memory stream to the writer task, a waiter's
memory stream, a task per notification, an OpenTelemetry span; each answer comes back through the reader's memory
stream and the dispatcher's receive loop. On a warm stdio session that machinery is most of the pool loop's CPU per
call (a runner's, or a web process's in `make run`). Here the request is built exactly as the SDK builds it (the
session's own stamp, its id counter, progressToken = id), written to the server's stdin as the SDK's writer writes
it, and its answer is taken by the transport's reader (stdio.StdioChannel.taken) and checked as
`ClientSession.call_tool` checks it. Everything else on the session (server requests of a 2025 server during the
call, notifications) still goes through the SDK.
"""

from __future__ import annotations

import asyncio
from typing import Any

import anyio
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher

from tools_app.runtime.mcp.call_result import METHOD, checked_result, fresh_id, stamped_params, with_meta
from tools_app.runtime.mcp.stdio import StdioChannel, Waiter

# How long the courtesy notifications/cancelled of an abandoned call may take to write.
CANCEL_WRITE_S = 1.0


class OneLine:
    """tools/call of one stdio session, each as a line written and an answer taken from the reader."""

    def __init__(self, channel: StdioChannel) -> None:
        self.channel = channel

    async def call_tool(self, session: ClientSession, name: str, arguments: dict[str, Any], progress: Any,
                        input_responses: types.InputResponses | None, request_state: str | None) -> Any:
        """`session.call_tool(name, arguments, progress_callback=progress, input_responses=..., request_state=...,
        allow_input_required=True)`: the same line on the wire and the same result or error back."""
        dispatcher = session._dispatcher
        if not isinstance(dispatcher, JSONRPCDispatcher):
            raise TypeError("the one-line path needs the session's JSON-RPC dispatcher")
        if dispatcher._closed or self.channel.closed_reason is not None:
            # The reader has ended: nobody would answer a waiter registered now.
            raise MCPError(code=types.CONNECTION_CLOSED, message="Connection closed")
        params, _headers = stamped_params(session, name, arguments, input_responses, request_state)
        request_id = fresh_id(dispatcher, self.channel.waiters)
        request = types.JSONRPCRequest(jsonrpc="2.0", id=request_id, method=METHOD,
                                       params=with_meta(params, request_id, progress is not None))
        line = (request.model_dump_json(by_alias=True, exclude_unset=True) + "\n").encode("utf-8")
        waiter = Waiter(answer=asyncio.get_running_loop().create_future(), progress=progress)
        self.channel.waiters[request_id] = waiter
        written = False
        try:
            try:
                written = True  # as the dispatcher: a write that started counts as issued
                await self.channel.send_line(line)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                raise MCPError(code=types.CONNECTION_CLOSED, message="Connection closed") from None
            outcome = await waiter.answer
        except asyncio.CancelledError:
            if written:
                await self._cancel(request_id)
            raise
        finally:
            self.channel.waiters.pop(request_id, None)
        return await checked_result(session, name, outcome)

    async def _cancel(self, request_id: int) -> None:
        """The courtesy notifications/cancelled the SDK's dispatcher sends for a request its caller abandoned."""
        note = types.JSONRPCNotification(jsonrpc="2.0", method="notifications/cancelled",
                                         params={"requestId": request_id, "reason": "caller cancelled"})
        with anyio.CancelScope(shield=True), anyio.move_on_after(CANCEL_WRITE_S):
            try:
                await self.channel.send_line(
                    (note.model_dump_json(by_alias=True, exclude_unset=True) + "\n").encode("utf-8"))
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                pass
