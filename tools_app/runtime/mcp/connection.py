"""One live MCP session (LOCAL or REMOTE), owned by a single task from connect to close."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import Any, TypeVar

import anyio
import httpx2
import mcp_types as types
import pydantic
from mcp.client._input_required import InputRequiredRoundsExceededError, run_input_required_driver
from mcp.client._probe import negotiate_auto
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

from core.outbound import OutboundPolicy, safe_url
from core.secrets import scrub_text
from core.version import VERSION
from tools_app.runtime.errors import (
    ConnectionFailed,
    InputRoundsExceeded,
    MalformedResult,
    ProtocolError,
    ProtocolVersionUnsupported,
    RemoteHTTPError,
    RuntimeToolError,
    ServerExited,
    StartupTimeout,
    ToolTimeout,
    WrongTransport,
)
from tools_app.runtime.mcp.client_requests import (
    INPUT_REQUIRED,
    INPUT_STATE_STALE,
    NOBODY,
    ClientRequestRefused,
    ClientRequests,
    InputHandedBack,
    InputStateStale,
)
from tools_app.runtime.mcp.discovery import (
    Discovery,
    FunctionInfo,
    build_discovery,
    instructions_of,
    list_all_tools,
    list_server_texts,
    to_tool_result,
)
from tools_app.runtime.mcp.http import HttpChannel, http_transport
from tools_app.runtime.mcp.oneline import OneLine
from tools_app.runtime.mcp.post import OnePost
from tools_app.runtime.mcp.process import resolve_command, run_version_check, spawn
from tools_app.runtime.mcp.rawpost import RELIST, RawPost
from tools_app.runtime.mcp.rawwire import Endpoint
from tools_app.runtime.mcp.spec import LocalSpec, RemoteSpec, ServerSpec
from tools_app.runtime.mcp.stdio import StdioChannel, stdio_transport
from tools_app.runtime.result import BUSINESS_ERROR, EXECUTION_ERROR, INVALID_PARAMS, TIMEOUT, ToolResult

T = TypeVar("T")

# Toolhub's identity in initialize (servers log it and some adapt to it).
CLIENT_INFO = types.Implementation(name="toolhub", version=VERSION)
# Server log messages kept per call (the audit row keeps a capped excerpt of these).
MAX_LOGS_PER_CALL = 50

ProgressFn = Callable[[float, float | None, str | None], None]

# Servers that use roots (filesystem, everything) ask for them right after `initialized` and apply the
# answer asynchronously; a connection offering roots waits this long for that request before its first use,
# then lets the answer settle, so the first call does not race the server's own setup.
ROOTS_GRACE_S = 0.3
ROOTS_SETTLE_S = 0.1

# Time to let a dying child's stderr arrive before the error message is built.
STDERR_SETTLE_S = 0.5

# Rounds of 2026-07-28 `input_required` answers one call may take before Toolhub gives up (TOOLHUB_MCP_INPUT_ROUNDS).
DEFAULT_INPUT_ROUNDS = 10
# A 2026 round with nothing to ask (requestState only) is retried after this, doubling to the cap (as the SDK's driver).
STATE_ONLY_BACKOFF_S = 0.05
STATE_ONLY_BACKOFF_CAP_S = 0.25
# Every MCP revision Toolhub's client speaks, oldest first (server/discover first, the initialize handshake after).
CLIENT_VERSIONS = (*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS)

# A stdio server that leaves requests it does not know unanswered (some hand-written and older ones do) would hold
# the 2026 probe for the SDK's whole discover timeout (10 s) before the handshake. On stdio an answer comes at once
# when it comes at all, so the first probe of a tool revision waits this long (TOOLHUB_MCP_STDIO_DISCOVER_S), and
# the era each revision turned out to speak is remembered in this process: its next connections go straight to it.
DEFAULT_STDIO_DISCOVER_S = 2.0
STDIO_ERAS_KEPT = 4096
_stdio_eras: dict[tuple[int, int], bool] = {}  # (tool id, config version) -> speaks a stateless (2026) revision


def stdio_era(revision: tuple[int, int]) -> bool | None:
    """The era a LOCAL tool revision spoke when this process last connected to it (None: not yet known)."""
    return _stdio_eras.get(revision)


def _remember_stdio_era(revision: tuple[int, int], modern: bool) -> None:
    if revision not in _stdio_eras and len(_stdio_eras) >= STDIO_ERAS_KEPT:
        _stdio_eras.pop(next(iter(_stdio_eras)))
    _stdio_eras[revision] = modern


def _leaf_exceptions(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        out: list[BaseException] = []
        for inner in exc.exceptions:
            out.extend(_leaf_exceptions(inner))
        return out
    return [exc]


class Connection:
    """A session whose transport and ClientSession live in one owner task (anyio scopes need that)."""

    def __init__(
        self,
        spec: ServerSpec,
        policy: OutboundPolicy,
        *,
        on_spawn: Callable[[int], None] | None = None,
        max_input_rounds: int = DEFAULT_INPUT_ROUNDS,
        stdio_discover_s: float = DEFAULT_STDIO_DISCOVER_S,
        one_post: bool = True,
    ) -> None:
        self.spec = spec
        self.policy = policy
        self.on_spawn = on_spawn
        self.max_input_rounds = max_input_rounds
        self.stdio_discover_s = stdio_discover_s
        self.session: ClientSession | None = None
        # What the server said about itself once the era was settled (discover or initialize).
        self.server_info: types.Implementation | None = None
        self.protocol_version = ""
        self.instructions = ""  # the server's `instructions` (read by the screen, passed to no model)
        # A 2026-07-28 listing's cache hint (ttlMs): until this monotonic time a rediscovery may reuse it.
        self._listing_fresh_until = 0.0
        self.functions: dict[str, FunctionInfo] = {}
        self.pid: int | None = None
        self.broken: RuntimeToolError | None = None
        self.retired = False
        # The last call failed before its request was sent (the session had already closed).
        self.unsent = False
        self.inflight = 0
        self.last_used = time.monotonic()
        self.connect_ms = 0
        # The listing made while connecting answers the first discover(): no second tools/list.
        self._fresh_listing = False
        # Log lists of the calls in flight: a server's log message goes to every call running when it came.
        self._log_sinks: list[list[dict[str, Any]]] = []
        # Who answers a server's sampling/elicitation request: the handlers of the calls in flight.
        self._askers: list[ClientRequests] = []
        self._roots_asked = asyncio.Event()
        self._channel: StdioChannel | HttpChannel | None = None
        # A 2026 streamable HTTP tools/call as one POST (post.py), a stdio one as one line (oneline.py), rather than
        # through the SDK's dispatcher; off only to compare the paths (the fidelity tests, bench/).
        self.one_post = one_post
        self._poster: OnePost | OneLine | None = None
        # A warm 2026 streamable HTTP tools/call sent from the calling thread (rawpost.py; SessionPool.call, which
        # decides whether to use it: TOOLHUB_MCP_RAW_POST), made once the session is open when it can be.
        self.raw: RawPost | None = None
        self._failed = asyncio.Event()
        self._closing = asyncio.Event()
        self._closed = asyncio.Event()
        self._ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._task: asyncio.Task[None] | None = None

    # ---- lifecycle -------------------------------------------------------------------------------

    async def open(self) -> None:
        """Connect, initialize and list tools within the startup timeout; typed error otherwise."""
        started = time.monotonic()
        self._task = asyncio.get_running_loop().create_task(self._own())
        try:
            await asyncio.shield(self._ready)
        except asyncio.CancelledError:
            await self.close()
            raise
        self.connect_ms = int((time.monotonic() - started) * 1000)
        self.raw = self._make_raw()

    def _make_raw(self) -> RawPost | None:
        """The blocking one-POST sender, for a stateless (2026-07-28) streamable HTTP session over plain http with no
        OAuth provider (its tokens are asked on the loop); None otherwise."""
        target = self.spec.target
        if (not self.modern or not isinstance(self._channel, HttpChannel)
                or not isinstance(target, RemoteSpec) or target.transport != "streamable_http"
                or target.token is not None or not Endpoint.usable(target.url)):
            return None
        return RawPost(self, Endpoint(target.url, self.policy, target.headers), self.protocol_version)

    @property
    def busy(self) -> bool:
        """A call is in flight, on the loop or in a worker thread (RawPost)."""
        return self.inflight > 0 or (self.raw is not None and self.raw.inflight > 0)

    async def close(self) -> None:
        self._closing.set()
        if self.raw is not None:
            self.raw.close()
        if self._task is not None:
            await asyncio.shield(self._closed.wait())

    @property
    def alive(self) -> bool:
        """Open, not failed, and its server still there: a session whose LOCAL process died (or whose stream ended)
        while idle is not alive, so every path that takes a session (call, listing, prompts and resources, the
        reaper) replaces or drops it instead of sending into it."""
        return self._ready.done() and not self._closing.is_set() and self.broken is None and not self.exited()

    async def _own(self) -> None:
        try:
            async with AsyncExitStack() as stack:
                read_stream, write_stream = await self._open_transport(stack)
                session = await stack.enter_async_context(ClientSession(
                    read_stream,
                    write_stream,
                    client_info=CLIENT_INFO,
                    list_roots_callback=self._list_roots if self._roots() else None,
                    logging_callback=self._on_log,
                    sampling_callback=self._on_sampling if self.spec.target.sampling else None,
                    elicitation_callback=self._on_elicitation if self.spec.target.elicitation else None,
                    # 2026-07-28 servers log only for requests that opt in; the handshake era logs unasked.
                    log_level="debug",
                ))
                self.session = session
                with anyio.fail_after(self.spec.startup_timeout_s):
                    await self._watched(self._negotiate(session))
                    functions = await self._watched(self._list(session))
                self.functions = {f.name: f for f in functions}
                self._fresh_listing = True
                if self._roots() and not self.modern:
                    with anyio.move_on_after(ROOTS_GRACE_S):
                        await self._roots_asked.wait()
                        await anyio.sleep(ROOTS_SETTLE_S)
                self._ready.set_result(None)
                await self._closing.wait()
        except BaseException as exc:
            error = await self._translate(exc, starting=not self._ready.done())
            if not self._ready.done():
                self._ready.set_exception(error)
            elif self.broken is None and not self._closing.is_set():
                self.broken = error
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            self.session = None
            self._closed.set()

    # ---- the protocol era ----------------------------------------------------------------------------

    @property
    def modern(self) -> bool:
        """The session speaks a stateless revision (2026-07-28 on): input requests come as input_required results."""
        return self.protocol_version in MODERN_PROTOCOL_VERSIONS

    async def _negotiate(self, session: ClientSession) -> None:
        """server/discover first, the initialize handshake when the server does not speak it (the SDK's dual-era
        policy); the legacy SSE transport exists only in the handshake era, so it goes straight to initialize."""
        target = self.spec.target
        channel = self._channel
        if isinstance(target, RemoteSpec) and target.transport == "sse":
            await session.initialize()
        elif isinstance(target, LocalSpec):
            await self._negotiate_stdio(session)
        else:
            await negotiate_auto(session)
        self.protocol_version = session.protocol_version or ""
        self.server_info = session.server_info
        self.instructions = instructions_of(session)
        if isinstance(channel, HttpChannel):
            channel.modern = self.modern

    async def _negotiate_stdio(self, session: ClientSession) -> None:
        """The SDK's policy with a short first probe: a server silent on server/discover is met with the handshake
        after stdio_discover_s, not 10 s; the era found is remembered per tool revision (DEFAULT_STDIO_DISCOVER_S)."""
        revision = (self.spec.tool_id, self.spec.config_version)
        known = stdio_era(revision)
        if known is None:
            with anyio.move_on_after(self.stdio_discover_s) as waited:
                try:
                    await session.send_discover(MODERN_PROTOCOL_VERSIONS[-1])
                except MCPError:
                    pass  # it answers, if only to refuse: the SDK's policy below reads the answer
            known = False if waited.cancelled_caught else None
        if known is False:
            await self._handshake_or_reprobe(session)
        else:
            await negotiate_auto(session)
        _remember_stdio_era(revision, session.protocol_version in MODERN_PROTOCOL_VERSIONS)

    async def _handshake_or_reprobe(self, session: ClientSession) -> None:
        """The handshake; a -32022 refusal of it (a 2026-only server that was slow to read the probe, or one
        upgraded in place) goes back to the SDK's discover-first policy."""
        try:
            await session.initialize()
        except MCPError as exc:
            if exc.code != types.UNSUPPORTED_PROTOCOL_VERSION:
                raise
            await negotiate_auto(session)

    async def _list(self, session: ClientSession) -> list[FunctionInfo]:
        functions, ttl_ms = await list_all_tools(session)
        # A hint of 0 (or none) means "ask again each time"; a listing Toolhub asked for is never older than its hint.
        self._listing_fresh_until = time.monotonic() + ttl_ms / 1000 if ttl_ms and self.modern else 0.0
        return functions

    def _version_refused(self, supported: Any, requested: Any) -> ProtocolVersionUnsupported:
        theirs = [str(v) for v in supported] if isinstance(supported, list) else []
        named = ", ".join(theirs) or "no revision it named"
        return ProtocolVersionUnsupported(
            self.redact(f"{self._where()} speaks MCP {named}; Toolhub speaks {', '.join(CLIENT_VERSIONS)}"),
            details={"supported": theirs, "requested": str(requested or ""), "toolhub": list(CLIENT_VERSIONS)},
        )

    # ---- client capabilities -----------------------------------------------------------------------

    def _roots(self) -> tuple[str, ...]:
        target = self.spec.target
        return target.roots if isinstance(target, LocalSpec) else ()

    async def _list_roots(self, context: Any) -> types.ListRootsResult:
        roots = [types.Root(uri=f"file://{path}", name=path.rstrip("/").rsplit("/", 1)[-1] or "/")  # type: ignore[arg-type]
                 for path in self._roots()]
        self._roots_asked.set()
        return types.ListRootsResult(roots=roots)

    async def _on_log(self, params: types.LoggingMessageNotificationParams) -> None:
        entry = {"level": params.level, "logger": params.logger, "data": params.data}
        for sink in self._log_sinks:
            if len(sink) < MAX_LOGS_PER_CALL:
                sink.append(entry)

    async def _on_log_wire(self, params: dict[str, Any]) -> None:
        """A log notification's params off the wire, checked as the SDK's session checks them before its callback."""
        try:
            typed = types.LoggingMessageNotificationParams.model_validate(params, by_name=False)
        except pydantic.ValidationError:
            return  # the SDK drops a malformed notification too
        await self._on_log(typed)

    def _asker(self) -> tuple[ClientRequests | None, str]:
        """The handlers of the call the server's request belongs to, or (None, why it cannot be told).

        JSON-RPC does not say which of our requests a server request belongs to; with one call in flight
        (or several of the same asker) it is that call's. Several callers at once cannot be told apart, and
        guessing could put one user's question to another, so the request is declined.
        """
        askers = {id(a): a for a in self._askers}
        if len(askers) == 1:
            return next(iter(askers.values())), ""
        if not askers:
            return None, "declined: the server asked outside any tool call"
        return None, ("declined: several calls from different callers are running on this session, so Toolhub "
                      "cannot tell which one the request belongs to")

    async def _ask(self, handler: Any, payload: dict[str, Any]) -> dict[str, Any] | types.ErrorData:
        try:
            answer: dict[str, Any] = await anyio.to_thread.run_sync(handler, payload, abandon_on_cancel=True)
            return answer
        except ClientRequestRefused as exc:
            return types.ErrorData(code=types.INVALID_REQUEST, message=self.redact(exc.message))
        except Exception as exc:  # noqa: BLE001 - a handler's failure is the server's answer, not ours
            return types.ErrorData(code=types.INTERNAL_ERROR,
                                   message=f"declined: Toolhub could not answer ({type(exc).__name__})")

    async def _on_sampling(self, context: Any, params: types.CreateMessageRequestParams) -> Any:
        asker, why = self._asker()
        if asker is None or asker.sample is None:
            return types.ErrorData(code=types.INVALID_REQUEST, message=why or (asker or NOBODY).no_sample)
        answer = await self._ask(asker.sample, params.model_dump(mode="json", by_alias=True, exclude_none=True))
        if isinstance(answer, types.ErrorData):
            return answer
        return types.CreateMessageResult.model_validate(answer)

    async def _on_elicitation(self, context: Any, params: types.ElicitRequestParams) -> Any:
        asker, why = self._asker()
        if asker is None or asker.elicit is None:
            return types.ErrorData(code=types.INVALID_REQUEST, message=why or (asker or NOBODY).no_elicit)
        answer = await self._ask(asker.elicit, params.model_dump(mode="json", by_alias=True, exclude_none=True))
        if isinstance(answer, types.ErrorData):
            return answer
        return types.ElicitResult.model_validate(answer)

    async def _open_transport(self, stack: AsyncExitStack) -> tuple[Any, Any]:
        target = self.spec.target
        if isinstance(target, LocalSpec):
            executable = resolve_command(target)
            if target.version_check:
                await run_version_check(executable, target)
            process = await spawn(executable, target)
            self.pid = process.pid
            if self.on_spawn is not None:
                self.on_spawn(process.pid)
            read_stream, write_stream, channel = await stack.enter_async_context(stdio_transport(process))
            self._channel = channel
            if self.one_post:
                # Log messages in the reader's order, ahead of the answer that follows them (the one-line path's
                # answer does not wait for the SDK's notification tasks).
                channel.on_log = self._on_log_wire
        else:
            assert isinstance(target, RemoteSpec)
            http_channel = HttpChannel(url=safe_url(target.url))
            self._channel = http_channel
            read_stream, write_stream = await stack.enter_async_context(
                http_transport(target, self.policy, http_channel)
            )
            if http_channel.failure is not None:
                raise http_channel.failure
        return read_stream, write_stream

    async def _watched(self, awaitable: Awaitable[T]) -> T:
        """Await `awaitable`, but give up as soon as the transport records a failure it cannot report."""
        channel = self._channel
        if not isinstance(channel, HttpChannel):
            return await awaitable
        # One task the channel cancels when it records a failure (HttpChannel.record), not a second task waiting on
        # the channel's event beside it and an asyncio.wait over both: a warm call's loop steps are the pool
        # thread's CPU.
        task = asyncio.ensure_future(awaitable)
        if channel.failure is not None:
            task.cancel()
            raise channel.failure
        channel.watching.add(task)
        try:
            return await task  # cancelling the caller cancels the task too
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if channel.failure is None or (current is not None and current.cancelling()):
                raise  # the caller was cancelled (a timeout, its own caller), not the call by the channel
            raise channel.failure from None
        finally:
            channel.watching.discard(task)

    # ---- errors ----------------------------------------------------------------------------------

    def redact(self, text: str) -> str:
        """Mask configured env/header values (secrets) wherever a server echoed them into a message."""
        target = self.spec.target
        pairs = target.env if isinstance(target, LocalSpec) else target.headers
        return scrub_text(text, (value for _name, value in pairs))

    def exited(self) -> bool:
        """A LOCAL server whose process is already gone, a legacy SSE session whose stream ended, or an HTTP
        session whose transport already failed while idle (e.g. the streamable GET stream could not reconnect
        to a restarting server): nothing sent on this session can reach it."""
        channel = self._channel
        if isinstance(channel, HttpChannel):
            return channel.stream_ended or channel.failure is not None
        # The server's stdout ended (its reader saw EOF) before the loop reaped it, or it was reaped.
        return isinstance(channel, StdioChannel) and (channel.closed_reason is not None
                                                      or channel.process.returncode is not None)

    def never_reached(self) -> bool:
        """The last failure proves the request never ran: the server forgot the session (404, or 400, after a restart)
        or the connection could not even be made. Only then is one retry on a fresh session safe."""
        broken = self.broken
        if self.unsent:
            return True
        if isinstance(broken, RemoteHTTPError):
            # 404 is the spec's answer to an unknown session; the TypeScript SDK's servers answer 400 ("No valid
            # session ID"). Either way the HTTP layer refused the request before any tool ran.
            return broken.details.get("status") in (400, 404)
        return isinstance(broken, ConnectionFailed) and "ConnectError" in broken.message

    def _where(self) -> str:
        target = self.spec.target
        if isinstance(target, LocalSpec):
            return f"MCP server {target.command!r}"
        return f"MCP server {safe_url(target.url)}"

    async def _stderr_tail(self) -> str:
        channel = self._channel
        if not isinstance(channel, StdioChannel):
            return ""
        with anyio.move_on_after(STDERR_SETTLE_S):
            while channel.process.returncode is None:
                await anyio.sleep(0.02)
        await anyio.sleep(0.05)
        return self.redact(channel.stderr.text())

    async def _translate(self, exc: BaseException, *, starting: bool) -> RuntimeToolError:
        leaves = _leaf_exceptions(exc)
        channel = self._channel
        if isinstance(channel, HttpChannel) and channel.failure is not None:
            return self._refine_http(channel.failure)
        for leaf in leaves:
            if isinstance(leaf, RuntimeToolError):
                return leaf
        where = self._where()
        for leaf in leaves:
            refused = self._refusal(leaf)
            if refused is not None:
                return refused
            if isinstance(leaf, TimeoutError) and starting:
                return StartupTimeout(
                    f"{where} did not answer initialize within {self.spec.startup_timeout_s:g} s"
                    + await self._stderr_suffix()
                )
            if isinstance(leaf, MCPError):
                if leaf.code == types.CONNECTION_CLOSED and isinstance(channel, StdioChannel):
                    return await self._exited_error()
                return ProtocolError(self.redact(f"{where} failed: {leaf.message}"))
            if isinstance(leaf, httpx2.SSEError | httpx2.HTTPStatusError) and isinstance(self.spec.target, RemoteSpec):
                return WrongTransport(
                    f"{where} did not answer as an {self.spec.target.transport} endpoint; check the transport"
                )
            if isinstance(leaf, httpx2.HTTPError):
                return ConnectionFailed(f"{where}: {type(leaf).__name__}")
            if isinstance(leaf, asyncio.CancelledError):
                continue
        if isinstance(channel, StdioChannel) and channel.process.returncode is not None:
            return await self._exited_error()
        names = ", ".join(sorted({type(leaf).__name__ for leaf in leaves}))
        return ConnectionFailed(f"{where} connection failed ({names})")

    def _refusal(self, leaf: BaseException) -> ProtocolVersionUnsupported | None:
        """A version refusal: JSON-RPC -32022 naming the server's revisions, or a handshake answered with a revision
        the SDK does not know."""
        if isinstance(leaf, MCPError) and leaf.code == types.UNSUPPORTED_PROTOCOL_VERSION:
            data = leaf.error.data if isinstance(leaf.error.data, dict) else {}
            return self._version_refused(data.get("supported"), data.get("requested"))
        prefix = "Unsupported protocol version from the server: "
        if isinstance(leaf, RuntimeError) and str(leaf).startswith(prefix):
            return self._version_refused([str(leaf)[len(prefix):]], HANDSHAKE_PROTOCOL_VERSIONS[-1])
        if isinstance(leaf, RuntimeError) and str(leaf).startswith("No mutually supported modern protocol version"):
            return self._version_refused(None, MODERN_PROTOCOL_VERSIONS[-1])
        return None

    async def _stderr_suffix(self) -> str:
        tail = await self._stderr_tail() if isinstance(self._channel, StdioChannel) else ""
        return f"; stderr: {tail[-2000:]}" if tail else ""

    async def _exited_error(self) -> RuntimeToolError:
        tail = await self._stderr_tail()
        channel = self._channel
        if isinstance(channel, StdioChannel) and channel.closed_reason and channel.garbage:
            suffix = f"; stderr: {tail}" if tail else ""
            return ProtocolError(f"{self._where()}: {channel.closed_reason}{suffix}")
        code = channel.process.returncode if isinstance(channel, StdioChannel) else None
        status = f" with status {code}" if code is not None else ""
        reason = channel.closed_reason if isinstance(channel, StdioChannel) else None
        message = f"{self._where()} exited{status}" if code is not None else f"{self._where()} closed the connection"
        if reason and code is None:
            message += f" ({reason})"
        if tail:
            message += f"; stderr: {tail}"
        return ServerExited(message, details={"exit_status": code})

    def _refine_http(self, failure: RuntimeToolError) -> RuntimeToolError:
        target = self.spec.target
        status = failure.details.get("status") if isinstance(failure, RemoteHTTPError) else None
        if isinstance(target, RemoteSpec) and status in (405, 406):
            other = "sse" if target.transport == "streamable_http" else "streamable_http"
            return WrongTransport(
                f"{failure.message}: the URL does not speak {target.transport}; try transport {other!r}",
                details={"status": status},
            )
        return failure

    # ---- operations ------------------------------------------------------------------------------

    def _require_session(self) -> ClientSession:
        if self.broken is not None:
            raise self.broken
        if self.session is None:
            raise ConnectionFailed(f"{self._where()} session is closed")
        return self.session

    async def discover(self) -> Discovery:
        session = self._require_session()
        if self._fresh_listing or time.monotonic() < self._listing_fresh_until:
            # The listing made while connecting, or one the server said stays true for a while (ttlMs).
            self._fresh_listing = False
            return self._discovery(list(self.functions.values()), self.connect_ms)
        started = time.monotonic()
        try:
            with anyio.fail_after(self.spec.call_timeout_s):
                functions = await self._watched(self._list(session))
        except TimeoutError:
            self.broken = ToolTimeout(f"{self._where()} did not answer tools/list within {self.spec.call_timeout_s:g} s")
            raise self.broken from None
        except RuntimeToolError:
            raise
        except Exception as exc:  # noqa: BLE001
            self.broken = await self._translate(exc, starting=False)
            raise self.broken from None
        self.functions = {f.name: f for f in functions}
        return self._discovery(functions, int((time.monotonic() - started) * 1000))

    def _discovery(self, functions: list[FunctionInfo], latency_ms: int) -> Discovery:
        return build_discovery(self.server_info, self.protocol_version, functions, latency_ms, self.instructions)

    async def call(
        self, function: str, arguments: dict[str, Any], timeout_s: float, on_progress: ProgressFn | None = None,
        client_requests: ClientRequests | None = None, first: Any = None,
    ) -> ToolResult:
        """One tools/call; connection-level failures mark the connection broken so the pool replaces it.

        With `on_progress` the request carries a progressToken and each progress notification is passed on.
        The server's log messages sent meanwhile come back in `meta["logs"]`. A sampling or elicitation
        request the server makes meanwhile goes to `client_requests` (none: declined with the reason).
        """
        session = self._require_session()
        self.inflight += 1
        self.last_used = time.monotonic()
        logs: list[dict[str, Any]] = []
        self._log_sinks.append(logs)
        asker = client_requests or NOBODY
        self._askers.append(asker)
        progress_callback = None
        if on_progress is not None:
            report = on_progress

            async def progress_callback(progress: float, total: float | None, message: str | None) -> None:
                try:
                    report(progress, total, message)
                except Exception:  # noqa: BLE001 - a listener's failure must not fail the call
                    pass

        try:
            out = await self._call_once(session, function, arguments, timeout_s, progress_callback, asker, first)
            if logs:
                out.meta["logs"] = [
                    {**entry, "data": self.redact(entry["data"]) if isinstance(entry["data"], str) else entry["data"]}
                    for entry in logs
                ]
            return out
        finally:
            self._log_sinks.remove(logs)
            self._askers.remove(asker)
            self.inflight -= 1
            self.last_used = time.monotonic()

    async def _call_tool(
        self, session: ClientSession, function: str, arguments: dict[str, Any], progress_callback: Any,
        asker: ClientRequests, first: Any = None,
    ) -> types.CallToolResult:
        """tools/call; a 2026-07-28 `input_required` answer is answered by this call's own handlers (so no guessing
        whose it is, unlike a 2025 server request) and the call sent again with the answers and the server's
        `requestState` as it came, for at most `max_input_rounds` rounds."""

        one_post = self._one_post()
        if first is RELIST:
            # rawpost's first send was refused as a header mismatch (before any tool ran): list, then send here.
            functions = await self._list(session)
            self.functions = {f.name: f for f in functions}
            first = None

        async def send(responses: types.InputResponses | None, state: str | None) -> Any:
            if one_post is not None:
                return await one_post.call_tool(session, function, arguments, progress_callback, responses, state)
            return await session.call_tool(function, arguments, progress_callback=progress_callback,
                                           input_responses=responses, request_state=state, allow_input_required=True)

        async def resend_after_relisting(responses: types.InputResponses | None, state: str | None) -> Any:
            try:
                return await send(responses, state)
            except MCPError as exc:
                if exc.code != types.HEADER_MISMATCH or not self.modern:
                    raise
                # The server's schema for this tool is newer than the listing the session mirrors headers from.
                functions = await self._list(session)
                self.functions = {f.name: f for f in functions}
                return await send(responses, state)

        return await self.with_input(resend_after_relisting, asker, repr(function), first)  # type: ignore[no-any-return]

    def _one_post(self) -> OnePost | OneLine | None:
        """The sender past the SDK's dispatcher, made on first use: one POST for a stateless (2026-07-28) streamable
        HTTP session, one line for a stdio session of either era; None otherwise (the SDK's ClientSession sends)."""
        if not self.one_post:
            return None
        if self._poster is not None:
            return self._poster
        channel = self._channel
        if isinstance(channel, StdioChannel):
            self._poster = OneLine(channel)
        elif self.modern and isinstance(channel, HttpChannel) and channel.client is not None:
            self._poster = OnePost(channel.client, self.spec.target.url, channel, self.protocol_version)  # type: ignore[union-attr]
        return self._poster

    async def with_input(self, send: Callable[[types.InputResponses | None, str | None], Awaitable[Any]],
                         asker: ClientRequests, what: str, first: Any = None) -> Any:
        """One request (tools/call, prompts/get, resources/read) whose 2026-07-28 `input_required` answers are
        answered by the request's own handlers and the request sent again with the answers and the server's
        `requestState` as it came, for at most `max_input_rounds` rounds. `send(responses, state)` sends it.

        With `asker.stateless` a 2026 server's questions for the caller end the request instead (InputHandedBack),
        and a resumed one is sent first with the caller's answers and the server's requestState (Resume).

        `first`: the request's first answer, already received (rawpost sent it from a worker thread): not sent again."""
        resume = asker.stateless
        rounds = 0
        if first is None and resume is not None and resume.resumed:
            if not self.modern or resume.revision != (self.spec.tool_id, self.spec.config_version):
                raise InputStateStale(f"the tool changed since {self._where()} asked for input during {what}; "
                                      "call again without a requestState")
            first = await send(_input_responses(resume.responses), resume.state)
            rounds = resume.rounds
        elif first is None:
            first = await send(None, None)
        if not isinstance(first, types.InputRequiredResult):
            return first
        if resume is not None and self.modern:
            return await self._hand_back(first, send, asker, what, rounds)

        declined: list[str] = []

        async def dispatch(_key: str, request: types.InputRequest) -> types.InputResponse | types.ErrorData:
            answer = await self._answer_input(asker, request)
            if isinstance(answer, types.ErrorData):
                declined.append(answer.message)
            return answer

        try:
            result = await run_input_required_driver(first, dispatch=dispatch, retry=send,
                                                     max_rounds=self.max_input_rounds)
        except MCPError as exc:
            if declined and exc.error.message == declined[0]:
                # The 2026 wire has no way to hand a refusal back to the server: the call ends here, with the reason.
                raise InputDeclined(self.redact(f"{self._where()} asked for input during {what}: "
                                                f"{declined[0]}")) from None
            raise
        except InputRequiredRoundsExceededError:
            raise InputRoundsExceeded(
                f"{self._where()} asked for input more than {self.max_input_rounds} times during {what}",
                details={"max_rounds": self.max_input_rounds},
            ) from None
        return result

    async def _hand_back(self, current: Any, send: Callable[[types.InputResponses | None, str | None], Awaitable[Any]],
                         asker: ClientRequests, what: str, rounds: int) -> Any:
        """Stateless rounds: answer here what Toolhub answers itself (roots; sampling and elicitation it may not
        relay are declined, ending the request as in place), and hand the caller's questions (elicitation, sampling:
        `_hands_back`) back (InputHandedBack)
        with the server's requestState; a round with nothing to ask is retried after a short backoff, as the SDK's
        driver does. Every round counts against `max_input_rounds`, resumed or not."""
        delay = STATE_ONLY_BACKOFF_S
        while isinstance(current, types.InputRequiredResult):
            rounds += 1
            if rounds > self.max_input_rounds:
                raise InputRoundsExceeded(
                    f"{self._where()} asked for input more than {self.max_input_rounds} times during {what}",
                    details={"max_rounds": self.max_input_rounds})
            requests = dict(current.input_requests or {})
            relayed = {key: request for key, request in requests.items() if self._hands_back(asker, request)}
            answered: dict[str, Any] = {}
            for key, request in requests.items():
                if key in relayed:
                    continue
                answer = await self._answer_input(asker, request)
                if isinstance(answer, types.ErrorData):
                    raise InputDeclined(self.redact(f"{self._where()} asked for input during {what}: "
                                                    f"{answer.message}"))
                answered[key] = answer
            if relayed:
                raise InputHandedBack({
                    "requests": {key: _wire(request) for key, request in relayed.items()},
                    "state": current.request_state, "answered": {key: _wire(a) for key, a in answered.items()},
                    "rounds": rounds, "revision": [self.spec.tool_id, self.spec.config_version]})
            if not requests:
                await anyio.sleep(delay)
                delay = min(delay * 2, STATE_ONLY_BACKOFF_CAP_S)
            current = await send(answered or None, current.request_state)
        return current

    def _hands_back(self, asker: ClientRequests, request: types.InputRequest) -> bool:
        """A question the caller answers (stateless rounds): an elicitation where the tool allows it, a sampling
        request where the tool's `sampling` setting allows it, each only when the caller can answer it (its
        handler is set: a gateway client that declared the capability). Roots are Toolhub's own answer."""
        target = self.spec.target
        if isinstance(request, types.ElicitRequest):
            return target.elicitation and asker.elicit is not None
        if isinstance(request, types.CreateMessageRequest):
            return target.sampling and asker.sample is not None
        return False

    async def asking(self, send: Callable[[ClientSession, types.InputResponses | None, str | None], Awaitable[Any]],
                     asker: ClientRequests, what: str) -> Any:
        """A request other than tools/call (prompts/get, resources/read) whose server may ask for input: a 2025
        server's requests during it and a 2026 server's `input_required` rounds both go to `asker`."""
        session = self.session
        if session is None:
            raise ConnectionFailed("the MCP session is not open")
        self._askers.append(asker)
        self.inflight += 1
        try:
            return await self._watched(self.with_input(lambda r, s: send(session, r, s), asker, what))
        finally:
            self._askers.remove(asker)
            self.inflight -= 1
            self.last_used = time.monotonic()

    async def _answer_input(self, asker: ClientRequests,
                            request: types.InputRequest) -> types.InputResponse | types.ErrorData:
        """One input request embedded in an `input_required` result, answered as the same request sent on its own
        by a 2025 server would be: elicitation and sampling by the call's handlers under the tool's settings,
        roots from the tool's roots."""
        target = self.spec.target
        if isinstance(request, types.ElicitRequest):
            if not target.elicitation or asker.elicit is None:
                why = asker.no_elicit if target.elicitation else "declined: elicitation is turned off for this tool"
                return types.ErrorData(code=types.INVALID_REQUEST, message=why)
            answer = await self._ask(asker.elicit, request.params.model_dump(mode="json", by_alias=True,
                                                                             exclude_none=True))
            return answer if isinstance(answer, types.ErrorData) else types.ElicitResult.model_validate(answer)
        if isinstance(request, types.CreateMessageRequest):
            if not target.sampling or asker.sample is None:
                why = asker.no_sample if target.sampling else "declined: sampling is turned off for this tool"
                return types.ErrorData(code=types.INVALID_REQUEST, message=why)
            answer = await self._ask(asker.sample, request.params.model_dump(mode="json", by_alias=True,
                                                                             exclude_none=True))
            return answer if isinstance(answer, types.ErrorData) else types.CreateMessageResult.model_validate(answer)
        if not self._roots():
            return types.ErrorData(code=types.INVALID_REQUEST, message="declined: this tool offers no roots")
        return await self._list_roots(None)

    async def _call_once(
        self, session: ClientSession, function: str, arguments: dict[str, Any], timeout_s: float,
        progress_callback: Any, asker: ClientRequests, first: Any = None,
    ) -> ToolResult:
        channel = self._channel
        posts_before = channel.posts if isinstance(channel, HttpChannel) else -1
        try:
            with anyio.fail_after(timeout_s):
                result = await self._watched(self._call_tool(session, function, arguments, progress_callback, asker,
                                                             first))
            out = to_tool_result(result)
            if out.error:
                out.error = self.redact(out.error)
            return out
        except TimeoutError:
            # The server may still be working on it; a fresh session is the only sure way to unwedge.
            self.retired = True
            return ToolResult.fail(TIMEOUT, f"{self._where()} call {function!r} timed out after {timeout_s:g} s")
        except MCPError as exc:
            if exc.code == types.CONNECTION_CLOSED:
                # Over HTTP, no POST since the call began means the request never left: safe to retry.
                self.unsent = isinstance(channel, HttpChannel) and channel.posts == posts_before
                self.broken = await self._translate(exc, starting=False)
                return ToolResult.fail(EXECUTION_ERROR, self.broken.message, error_type=self.broken.code)
            if exc.code == types.INVALID_PARAMS:
                return ToolResult.fail(INVALID_PARAMS, self.redact(exc.message))
            channel = self._channel
            if isinstance(channel, HttpChannel) and channel.failure is not None:
                self.broken = self._refine_http(channel.failure)
                return ToolResult.fail(EXECUTION_ERROR, self.broken.message, error_type=self.broken.code)
            return ToolResult.fail(
                "BUSINESS_ERROR",
                self.redact(f"{self._where()} returned error {exc.code}: {exc.message}"),
                jsonrpc_code=exc.code,
            )
        except InputDeclined as exc:
            return ToolResult.fail(BUSINESS_ERROR, exc.message, input_declined=True)
        except InputHandedBack as exc:
            # Not a result yet: the caller (a 2026 gateway client) answers and calls again, on any process.
            asked = len(exc.payload["requests"])
            handed = ToolResult.ok(text=f"{self._where()} asked for input ({asked} question(s), round "
                                        f"{exc.payload['rounds']}); handed to the caller, who answers by calling again")
            handed.meta[INPUT_REQUIRED] = exc.payload
            return handed
        except InputStateStale as exc:
            return ToolResult.fail(BUSINESS_ERROR, exc.message, **{INPUT_STATE_STALE: True})
        except InputRoundsExceeded as exc:
            return ToolResult.fail(EXECUTION_ERROR, exc.message, error_type=exc.code, **exc.details)
        except (RuntimeError, pydantic.ValidationError) as exc:
            error = MalformedResult(
                self.redact(f"{self._where()} returned a malformed result for {function!r}: {_brief(exc)}")
            )
            return ToolResult.fail(EXECUTION_ERROR, error.message, error_type=error.code)
        except RuntimeToolError as exc:
            self.broken = exc
            return ToolResult.fail(exc.result_code, exc.message, error_type=exc.code)

    async def list_now(self) -> dict[str, FunctionInfo]:
        self._fresh_listing = False
        self._listing_fresh_until = 0.0
        await self.discover()
        return self.functions


class InputDeclined(Exception):
    """Toolhub could not answer a 2026 server's input request for this call (nobody to ask, or turned off)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


_RESPONSES: pydantic.TypeAdapter[types.InputResponses] = pydantic.TypeAdapter(types.InputResponses)


def _input_responses(raw: dict[str, Any] | None) -> types.InputResponses | None:
    """Wire answers (a Resume's) as the SDK's typed input responses."""
    return _RESPONSES.validate_python(raw) if raw else None


def _wire(model: Any) -> dict[str, Any]:
    dumped: dict[str, Any] = model.model_dump(by_alias=True, mode="json", exclude_none=True)
    return dumped


def _brief(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:300]


async def probe_connection(spec: ServerSpec, policy: OutboundPolicy, on_spawn: Callable[[int], None] | None = None,
                           *, stdio_discover_s: float = DEFAULT_STDIO_DISCOVER_S) -> Discovery:
    """Open a fresh connection, discover (or initialize) + list, close; returns a Discovery."""
    started = time.monotonic()
    conn = Connection(spec, policy, on_spawn=on_spawn, stdio_discover_s=stdio_discover_s)
    try:
        await conn.open()
        functions = list(conn.functions.values())
        found = conn._discovery(functions, int((time.monotonic() - started) * 1000))
        # What else the server tells a model, for the screen (outside the latency: it is Toolhub's extra ask).
        try:
            with anyio.move_on_after(spec.call_timeout_s):
                found.prompts, found.resources = await conn._watched(list_server_texts(conn._require_session()))
        except RuntimeToolError:
            pass  # the transport failed after the listing: the tools are known, the rest is not offered anyway
        return found
    finally:
        await conn.close()
