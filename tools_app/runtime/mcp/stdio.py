"""Our stdio transport: the SDK's ClientSession streams over a child we own (group kill, stderr tail)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp_types as types
from anyio.abc import Process
from mcp.shared.message import SessionMessage

from tools_app.runtime.errors import ProtocolError
from tools_app.runtime.mcp.process import StderrTail, stop_process

# One JSON-RPC line may not exceed this; a server flooding stdout without newlines is cut off.
MAX_LINE_BYTES = 16 * 1024 * 1024
# This many consecutive unparseable lines end the connection (a server printing garbage).
MAX_BAD_LINES = 100


@dataclass
class StdioChannel:
    """What the stdio transport exposes besides the streams."""

    process: Process
    stderr: StderrTail
    closed_reason: str | None = None
    garbage: bool = False  # the server broke the framing: its output was not JSON-RPC
    # Requests sent past the SDK's dispatcher (oneline.OneLine): their answers, by request id, are taken here from
    # the reader instead of going to the SDK; progress for them goes to their callback (and on to the SDK as well).
    waiters: dict[int, Waiter] = field(default_factory=dict)
    # Where a server's log messages go, in the reader's order (before the answer that follows them), instead of
    # through the SDK's notification tasks; None: to the SDK.
    on_log: Callable[[dict[str, Any]], Awaitable[None]] | None = None

    async def send_line(self, line: bytes) -> None:
        """One JSON-RPC line to the server's stdin (one write: it cannot interleave with the SDK writer's lines)."""
        assert self.process.stdin is not None
        await self.process.stdin.send(line)

    async def taken(self, message: Any) -> bool:
        """Whether `message` was for this channel's own waiters or log hook (then the SDK does not see it)."""
        if isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
            waiter = self.waiters.get(message.id) if isinstance(message.id, int) else None
            if waiter is None or waiter.answer.done():
                return False
            waiter.answer.set_result(message.result if isinstance(message, types.JSONRPCResponse) else message.error)
            return True
        if not isinstance(message, types.JSONRPCNotification) or not isinstance(message.params, dict):
            return False
        if message.method == "notifications/message" and self.on_log is not None:
            await self.on_log(message.params)
            return True
        if message.method == "notifications/progress" and self.waiters:
            await _progressed(self.waiters, message.params)
        return False

    def closed(self) -> None:
        """The server's stdout ended: every waiter is told as the SDK tells its own (CONNECTION_CLOSED), and
        `closed_reason` says so from now on (a request sent past the SDK checks it before it waits for an answer)."""
        self.closed_reason = self.closed_reason or "server closed stdout"
        for waiter in self.waiters.values():
            if not waiter.answer.done():
                waiter.answer.set_result(types.ErrorData(code=types.CONNECTION_CLOSED, message="Connection closed"))


@dataclass
class Waiter:
    """One request sent past the SDK: its answer (a result dict or ErrorData) and its progress callback."""

    answer: asyncio.Future[Any]
    progress: Callable[[float, float | None, str | None], Awaitable[None]] | None = None


async def _progressed(waiters: dict[int, Waiter], params: dict[str, Any]) -> None:
    """A progress notification for a waiter's token, to its callback as the SDK's dispatcher passes it on."""
    token, progress = params.get("progressToken"), params.get("progress")
    if (not isinstance(token, int) or isinstance(token, bool) or not isinstance(progress, int | float)
            or isinstance(progress, bool)):
        return
    waiter = waiters.get(token)
    if waiter is None or waiter.progress is None:
        return
    total, text = params.get("total"), params.get("message")
    try:
        await waiter.progress(float(progress), float(total) if isinstance(total, int | float) else None,
                              text if isinstance(text, str) else None)
    except Exception:  # noqa: BLE001 - as the SDK's _shielded_progress: a callback's failure is not the call's
        pass


@asynccontextmanager
async def stdio_transport(  # noqa: C901 - one transport loop: read, write, stderr, shutdown
    process: Process,
) -> AsyncIterator[tuple[anyio.abc.ObjectReceiveStream[SessionMessage | Exception],
                         anyio.abc.ObjectSendStream[SessionMessage], StdioChannel]]:
    """Bridge `process` stdio to memory streams; on exit stop the whole process group."""
    channel = StdioChannel(process=process, stderr=StderrTail())
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)

    async def stdout_reader() -> None:
        assert process.stdout is not None
        buffer = b""
        bad = 0
        try:
            async with read_writer:
                async for chunk in process.stdout:
                    buffer += chunk
                    if len(buffer) > MAX_LINE_BYTES and b"\n" not in buffer:
                        channel.closed_reason = f"server wrote a line longer than {MAX_LINE_BYTES} bytes"
                        channel.garbage = True
                        await read_writer.send(ProtocolError(channel.closed_reason))
                        return
                    *lines, buffer = buffer.split(b"\n")
                    for line in lines:
                        if not line.strip():
                            continue
                        try:
                            message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                        except ValueError:
                            bad += 1
                            if bad >= MAX_BAD_LINES:
                                channel.closed_reason = "server wrote non-JSON-RPC output on stdout"
                                channel.garbage = True
                                return
                            continue
                        bad = 0
                        if (channel.waiters or channel.on_log is not None) and await channel.taken(message):
                            continue
                        await read_writer.send(SessionMessage(message))
                channel.closed_reason = channel.closed_reason or "server closed stdout"
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            pass
        finally:
            channel.closed()

    async def stdin_writer() -> None:
        assert process.stdin is not None
        try:
            async with write_reader:
                async for message in write_reader:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                    await process.stdin.send(data.encode("utf-8"))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await read_writer.aclose()

    async def stderr_drain() -> None:
        assert process.stderr is not None
        try:
            async for chunk in process.stderr:
                channel.stderr.feed(chunk)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            pass

    async with anyio.create_task_group() as tg:
        tg.start_soon(stdout_reader)
        tg.start_soon(stdin_writer)
        tg.start_soon(stderr_drain)
        try:
            yield read_stream, write_stream, channel
        finally:
            with anyio.CancelScope(shield=True):
                write_stream.close()
                read_stream.close()
                await stop_process(process)
                for stream in (read_writer, write_reader):
                    await stream.aclose()
            tg.cancel_scope.cancel()
