"""The process-wide MCP session pool: one background event loop, warm sessions keyed by (tool_id, config_version,
principal): a tool that acts as each user upstream has one session per user."""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import dataclasses
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

import anyio

from core.outbound import OutboundPolicy
from core.process_state import on_fork_in_child
from tools_app.runtime.errors import (
    CapacityExceeded,
    ConnectionFailed,
    InvalidParams,
    RemoteHTTPError,
    RuntimeToolError,
    ToolTimeout,
    WrongTransport,
)
from tools_app.runtime.mcp.client_requests import ClientRequests
from tools_app.runtime.mcp.connection import (
    DEFAULT_INPUT_ROUNDS,
    DEFAULT_STDIO_DISCOVER_S,
    Connection,
    ProgressFn,
    probe_connection,
)
from tools_app.runtime.mcp.discovery import Discovery, FunctionInfo
from tools_app.runtime.mcp.rawpost import RELIST, HandOff, with_logs
from tools_app.runtime.mcp.spec import RemoteSpec, ServerSpec
from tools_app.runtime.result import EXECUTION_ERROR, INVALID_PARAMS, NOT_FOUND, TIMEOUT, ToolResult
from tools_app.runtime.schemas import validate_arguments

__all__ = ["Discovery", "FunctionInfo", "SessionPool", "configure_pool", "get_pool"]

T = TypeVar("T")
Key = tuple[int, int, str]  # (tool_id, config_version, principal): ServerSpec.key

# Extra time a sync caller waits beyond the operation's own timeouts before giving up on the loop.
SYNC_SLACK_S = 10.0


class SessionPool:
    """Warm MCP sessions shared by every thread of this process; sync methods, async variants prefixed `a`."""

    def __init__(
        self,
        *,
        policy: OutboundPolicy,
        idle_ttl_s: float = 300,
        max_per_tenant: int = 20,
        max_total: int = 100,
        input_rounds: int = DEFAULT_INPUT_ROUNDS,
        fair_share: bool = True,
        stdio_discover_s: float = DEFAULT_STDIO_DISCOVER_S,
        one_post: bool = True,
        raw_post: bool = True,
    ) -> None:
        self.policy = policy
        # A warm 2026 streamable HTTP tools/call sent from the calling thread (rawpost.py; TOOLHUB_MCP_RAW_POST).
        self.raw_post = raw_post
        # A 2026 streamable HTTP tools/call as one POST (post.py); off only to compare with the SDK's path.
        self.one_post = one_post
        # Rounds of 2026-07-28 input_required one call may take (TOOLHUB_MCP_INPUT_ROUNDS).
        self.input_rounds = input_rounds
        # How long a stdio server's first server/discover probe may go unanswered (TOOLHUB_MCP_STDIO_DISCOVER_S).
        self.stdio_discover_s = stdio_discover_s
        self.idle_ttl_s = idle_ttl_s
        self.max_per_tenant = max_per_tenant
        self.max_total = max_total
        # Each tenant's fair share of the slots (share()): one tenant cannot take a runner's every server slot.
        self.fair_share = fair_share
        self._lock = threading.Lock()
        # Calls sent from worker threads (rawpost.py): stats()["raw_calls"].
        self._raw_sent = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        # Running on a loop it was given (adopt()), not on a thread of its own.
        self._adopted = False
        # Loop-thread-only state from here on.
        self._conns: dict[Key, Connection] = {}
        self._opening: dict[Key, tuple[ServerSpec, asyncio.Future[Connection]]] = {}
        self._draining: set[Connection] = set()
        self._probing: dict[int, str] = {}
        self._bg: set[asyncio.Task[Any]] = set()
        self._reaper_task: asyncio.Task[None] | None = None
        self._counters = {"processes_spawned": 0, "sessions_opened": 0, "probes": 0, "recycled": 0, "reaped": 0, "evicted": 0,
                          "moved": 0}
        # A forked child (Celery prefork, gunicorn) has none of the parent's loop thread or sessions.
        on_fork_in_child(self._forget_after_fork)

    # ---- loop thread -----------------------------------------------------------------------------

    def _forget_after_fork(self) -> None:
        """In a forked child: the parent's loop thread, sessions and processes are not ours (core.process_state)."""
        self._lock = threading.Lock()
        self._loop, self._thread, self._adopted = None, None, False
        self._conns, self._opening, self._draining, self._probing = {}, {}, set(), {}
        self._bg, self._reaper_task = set(), None

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._adopted:
                assert self._loop is not None
                if not self._loop.is_running():
                    raise RuntimeError("the event loop this pool was given has stopped without release()")
                return self._loop
            if self._loop is None or not (self._thread and self._thread.is_alive()):
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=self._run_loop, args=(loop,), name="toolhub-mcp-pool", daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
                asyncio.run_coroutine_threadsafe(self._start_reaper(), loop).result(5)
            return self._loop

    @staticmethod
    def _run_loop(loop: asyncio.AbstractEventLoop) -> None:
        asyncio.set_event_loop(loop)
        loop.run_forever()

    def _run(self, coro: Coroutine[Any, Any, T], bound_s: float) -> T:
        if self._adopted and threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("a sync SessionPool method called on the loop the pool runs on would wait for itself: "
                               "await the async variant")
        try:
            loop = self._ensure_loop()
        except RuntimeError:
            coro.close()
            raise
        future = asyncio.run_coroutine_threadsafe(coro, loop)
        try:
            return future.result(timeout=bound_s)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise ToolTimeout(f"MCP pool operation did not finish within {bound_s:g} s") from None

    async def _on_loop(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` on the pool loop: awaited in place on that loop (adopt()), handed over from any other."""
        if self._adopted and asyncio.get_running_loop() is self._loop:
            return await coro
        future = asyncio.run_coroutine_threadsafe(coro, self._ensure_loop())
        return await asyncio.wrap_future(future)

    async def adopt(self) -> None:
        """Run on the calling event loop from now on, with no loop thread of its own: a runner's serving loop, the
        pool's only async caller there, then calls it with no hand-off between threads. Sync methods stay usable
        from other threads (they hand over to this loop); on the loop's own thread they raise. `release()` closes
        every session on this loop before it ends."""
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._loop is not None:
                raise RuntimeError("the pool already runs on an event loop")
            self._loop, self._thread, self._adopted = loop, threading.current_thread(), True
        await self._start_reaper()

    async def release(self) -> None:
        """Undo adopt(), on the adopted loop: every session closed and the reaper stopped while the loop still runs."""
        if not self._adopted or asyncio.get_running_loop() is not self._loop:
            return
        try:
            await self._close_all()
        finally:
            await self._stop_reaper()
            with self._lock:
                self._loop, self._thread, self._adopted = None, None, False

    def _spawned(self, _pid: int) -> None:
        self._counters["processes_spawned"] += 1

    # ---- public sync API -------------------------------------------------------------------------

    def probe(self, spec: ServerSpec) -> Discovery:
        """A fresh, unpooled connection: initialize + tools/list, then close (Test button, health check)."""
        return self._run(self._probe(spec), spec.startup_timeout_s + SYNC_SLACK_S)

    def discover(self, spec: ServerSpec) -> Discovery:
        """tools/list through the warm pooled session (connecting it if needed)."""
        return self._run(self._discover(spec), spec.startup_timeout_s + spec.call_timeout_s + SYNC_SLACK_S)

    def call(self, spec: ServerSpec, function: str, arguments: dict[str, Any], timeout_s: float | None = None,
             on_progress: ProgressFn | None = None, client_requests: ClientRequests | None = None) -> ToolResult:
        """One tools/call through the warm session; every failure comes back as a failed ToolResult.

        `on_progress(progress, total, message)` is called (on the pool's thread) for each progress notification;
        the server's sampling/elicitation requests during the call go to `client_requests` (else declined).
        """
        timeout = timeout_s or spec.call_timeout_s
        if on_progress is None and self.raw_post:
            done = self._raw_call(spec, function, arguments, timeout, client_requests)
            if done is not None:
                return done
        try:
            return self._run(self._call(spec, function, arguments, timeout, on_progress, client_requests),
                             spec.startup_timeout_s + timeout + SYNC_SLACK_S)
        except ToolTimeout as exc:
            return ToolResult.fail(TIMEOUT, exc.message)

    def _raw_call(self, spec: ServerSpec, function: str, arguments: dict[str, Any], timeout_s: float,
                  client_requests: ClientRequests | None) -> ToolResult | None:
        """The call sent from this thread on a warm stateless session's own socket (rawpost.py), with no hop to the
        pool's loop; None when it cannot be (nothing was sent: the loop's path takes the call). Never on the loop's
        own thread (an adopted loop's: blocking there would stall it; _run refuses that call)."""
        loop = self._loop
        conn = self._conns.get(spec.key)  # the loop's dict, read under the GIL; the connection's state re-checked
        raw = conn.raw if conn is not None else None
        if (loop is None or conn is None or raw is None or threading.current_thread() is self._thread
                or not conn.alive or conn.retired
                or (client_requests is not None and client_requests.stateless is not None
                    and client_requests.stateless.resumed)):
            return None
        info = conn.functions.get(function)
        if info is None:
            return None  # the loop lists again before saying no
        started = time.monotonic()
        conn.last_used = started
        try:
            validate_arguments(info.input_schema, arguments)
        except InvalidParams as exc:
            invalid = ToolResult.fail(INVALID_PARAMS, exc.message, **exc.details)
            invalid.cost_ms = int((time.monotonic() - started) * 1000)
            return invalid
        outcome = raw.call(function, arguments, timeout_s, loop, lambda: self._retire_soon(loop, conn))
        if outcome is None:
            return None
        with self._lock:
            self._raw_sent += 1
        left = max(timeout_s - (time.monotonic() - started), 0.001)
        if isinstance(outcome, HandOff):
            # The rest needs the loop: the input_required rounds (the first answer is not sent again), or a listing.
            first = outcome.first if outcome.kind == "input" else RELIST
            result = self._go_on(self._continue(conn, function, arguments, left, client_requests, first),
                                 spec.startup_timeout_s + left)
            with_logs(conn, result, outcome.logs)
        elif outcome.retry_fresh:
            result = self._go_on(self._fresh_call(spec, function, arguments, left, None, client_requests,
                                                  outcome.result), spec.startup_timeout_s + left)
        else:
            result = outcome.result
        result.cost_ms = int((time.monotonic() - started) * 1000)
        return result

    def _retire_soon(self, loop: asyncio.AbstractEventLoop, conn: Connection) -> None:
        """_retire on the pool's loop, from a worker thread (a loop already stopped has closed every session)."""
        try:
            loop.call_soon_threadsafe(self._retire, conn)
        except RuntimeError:
            pass

    def _go_on(self, coro: Coroutine[Any, Any, ToolResult], bound_s: float) -> ToolResult:
        try:
            return self._run(coro, bound_s + SYNC_SLACK_S)
        except ToolTimeout as exc:
            return ToolResult.fail(TIMEOUT, exc.message)

    async def _continue(self, conn: Connection, function: str, arguments: dict[str, Any], timeout_s: float,
                        client_requests: ClientRequests | None, first: Any) -> ToolResult:
        """A raw call's rest on the loop, on the same session (as _call_inner's conn.call)."""
        try:
            return await conn.call(function, arguments, timeout_s, None, client_requests, first=first)
        finally:
            if conn.broken is not None or conn.retired:
                self._retire(conn)

    def session_request(self, spec: ServerSpec, op: Callable[[Any], Awaitable[T]], timeout_s: float | None = None) -> T:
        """One read-only request (prompts/resources listing or reading) on the warm pooled session.

        `op` receives the SDK ClientSession; failures raise the typed runtime errors (the gateway forwards
        servers' prompts and resources this way).
        """
        timeout = timeout_s or spec.call_timeout_s

        async def run() -> T:
            conn = await self._acquire(spec)
            conn.last_used = time.monotonic()
            session = conn.session
            if session is None:
                raise ConnectionFailed("the MCP session is not open")
            with anyio.fail_after(timeout):
                return await op(session)

        return self._run(run(), spec.startup_timeout_s + timeout + SYNC_SLACK_S)

    def asking_request(self, spec: ServerSpec, send: Callable[[Any, Any, str | None], Awaitable[T]],
                       client_requests: ClientRequests, what: str, timeout_s: float | None = None) -> T:
        """prompts/get or resources/read on the warm pooled session, the server's questions answered by
        `client_requests` (either era: a 2025 server's requests, a 2026 server's input_required rounds, which
        `send(session, input_responses, request_state)` sends again with the answers)."""
        timeout = timeout_s or spec.call_timeout_s

        async def run() -> T:
            conn = await self._acquire(spec)
            conn.last_used = time.monotonic()
            with anyio.fail_after(timeout):
                answer: T = await conn.asking(send, client_requests, what)
                return answer

        return self._run(run(), spec.startup_timeout_s + timeout + SYNC_SLACK_S)

    def close(self, tool_id: int) -> None:
        if self._loop is not None:
            self._run(self._close_tool(tool_id), 30)

    def close_all(self) -> None:
        if self._loop is not None:
            self._run(self._close_all(), 60)

    def shutdown(self) -> None:
        """close_all, then stop the loop thread (interpreter exit)."""
        if self._loop is None:
            return
        if self._adopted:  # the loop is its owner's to stop: only the sessions end here, while it runs
            loop = self._loop
            if loop is not None and loop.is_running():
                self.close_all()
            return
        try:
            self.close_all()
        finally:
            loop, thread = self._loop, self._thread
            self._loop = None
            try:
                asyncio.run_coroutine_threadsafe(self._stop_reaper(), loop).result(5)
            except (concurrent.futures.TimeoutError, RuntimeError):
                pass
            loop.call_soon_threadsafe(loop.stop)
            if thread is not None:
                thread.join(5)

    def retire_idle_unless(self, keep: Callable[[Key], bool], idle_s: float) -> None:
        """Close, in the background, every session idle for `idle_s` whose key `keep` refuses (a runner's servers
        whose keys another runner owns now). Does not wait for the pool's loop."""
        if self._loop is not None:
            asyncio.run_coroutine_threadsafe(self._retire_idle_unless(keep, idle_s), self._loop)

    async def _retire_idle_unless(self, keep: Callable[[Key], bool], idle_s: float) -> None:
        now = time.monotonic()
        for key, conn in list(self._conns.items()):
            if not conn.busy and now - conn.last_used >= idle_s and not keep(key):
                self._counters["moved"] += 1
                self._retire(conn)

    def open_sessions(self) -> int:
        """How many sessions are open, read without waiting for the pool's loop (a runner's heartbeat must not)."""
        return len(self._conns)

    def stats(self) -> dict[str, Any]:
        if self._loop is None:
            return {**self._counters, "raw_calls": self._raw_sent, "open_sessions": 0, "opening": 0, "draining": 0, "tenants": {}}
        return self._run(self._stats(), 10)

    # ---- public async API (for code already running an event loop, e.g. the agent loop) ------------

    async def aprobe(self, spec: ServerSpec) -> Discovery:
        return await self._on_loop(self._probe(spec))

    async def adiscover(self, spec: ServerSpec) -> Discovery:
        return await self._on_loop(self._discover(spec))

    async def acall(self, spec: ServerSpec, function: str, arguments: dict[str, Any], timeout_s: float | None = None,
                    on_progress: ProgressFn | None = None, client_requests: ClientRequests | None = None) -> ToolResult:
        return await self._on_loop(self._call(spec, function, arguments, timeout_s or spec.call_timeout_s, on_progress,
                                              client_requests))

    # ---- loop-side implementation ----------------------------------------------------------------

    def _holders(self) -> list[str]:
        """The tenant of every slot taken: open and opening sessions, and probes in flight."""
        specs = [c.spec for c in self._conns.values()] + [s for s, _ in self._opening.values()]
        return [s.tenant_key for s in specs] + list(self._probing.values())

    def _count(self, tenant_key: str | None = None) -> int:
        tenants = self._holders()
        return len(tenants) if tenant_key is None else sum(1 for t in tenants if t == tenant_key)

    def share(self, tenant_key: str) -> int:
        """How many slots `tenant_key` may hold now: `max_per_tenant`, and with `fair_share` at most
        max(1, max_total // (n + 1)), n the tenants holding slots with this one. The + 1 keeps a share free for
        a tenant that holds none yet, so one that arrives gets a slot even while every other session is busy."""
        if not self.fair_share:
            return self.max_per_tenant
        active = len(set(self._holders()) | {tenant_key})
        return min(self.max_per_tenant, max(1, self.max_total // (active + 1)))

    def _evict_idle(self, tenant_key: str | None = None) -> bool:
        """Close the least recently used session with no call in flight: of `tenant_key` when given, else of a
        tenant holding more than its share when there is one (a fair share's slot given back), else anyone's."""
        idle = [c for c in self._conns.values()
                if not c.busy and (tenant_key is None or c.spec.tenant_key == tenant_key)]
        if tenant_key is None and self.fair_share:
            held = self._holders()
            over = {t for t in set(held) if held.count(t) > self.share(t)}
            idle = [c for c in idle if c.spec.tenant_key in over] or idle
        if not idle:
            return False
        self._counters["evicted"] += 1
        self._retire(min(idle, key=lambda c: c.last_used))
        return True

    def _check_capacity(self, spec: ServerSpec) -> None:
        # At a cap, an idle warm session gives way before anyone is refused; busy ones never do. A tenant at its
        # share makes room among its own sessions only: it never closes another tenant's warm server.
        cap = self.share(spec.tenant_key)
        while self._count(spec.tenant_key) >= cap and self._evict_idle(spec.tenant_key):
            pass
        if self._count(spec.tenant_key) >= cap:
            raise CapacityExceeded(
                f"capacity_exceeded: this tenant already has {cap} MCP sessions open"
                + (f" (its share of {self.max_total} while {len(set(self._holders()))} tenants hold sessions)"
                   if cap < self.max_per_tenant else ""),
                details={"limit": cap, "scope": "tenant"},
            )
        while self._count() >= self.max_total and self._evict_idle():
            pass
        if self._count() >= self.max_total:
            raise CapacityExceeded(
                f"capacity_exceeded: {self.max_total} MCP sessions are open in this process",
                details={"limit": self.max_total, "scope": "total"},
            )

    async def _probe(self, spec: ServerSpec) -> Discovery:
        self._check_capacity(spec)
        token = object()
        self._probing[id(token)] = spec.tenant_key
        self._counters["probes"] += 1
        try:
            try:
                return await probe_connection(spec, self.policy, on_spawn=self._spawned,
                                              stdio_discover_s=self.stdio_discover_s)
            except (WrongTransport, RemoteHTTPError) as exc:
                await self._try_other_transport(spec, exc)
                raise
        finally:
            self._probing.pop(id(token), None)

    async def _try_other_transport(self, spec: ServerSpec, failure: RuntimeToolError) -> None:
        """A REMOTE probe refused over its transport: if the other one answers, raise WrongTransport naming it."""
        target = spec.target
        if not isinstance(target, RemoteSpec):
            return
        other = "sse" if target.transport == "streamable_http" else "streamable_http"
        trial = dataclasses.replace(spec, target=dataclasses.replace(target, transport=other))
        try:
            await probe_connection(trial, self.policy, stdio_discover_s=self.stdio_discover_s)
        except RuntimeToolError:
            return  # neither answered: the original error stands
        raise WrongTransport(
            f"{failure.message}; the URL answers as {other!r}, not {target.transport!r}: set transport {other!r}",
            details={"configured": target.transport, "answered": other},
        ) from None

    async def _acquire(self, spec: ServerSpec) -> Connection:
        key = spec.key
        conn = self._conns.get(key)
        if conn is not None:
            if conn.alive and not conn.retired:
                return conn
            self._retire(conn)
        # A new config_version supersedes every older session of the same tool; a user's new credentials, the
        # session opened with their old ones.
        for other_key, other in list(self._conns.items()):
            if other_key[0] == spec.tool_id and (other_key[1] < spec.config_version or _same_user_older(other_key, key)):
                self._counters["recycled"] += 1
                self._retire(other)
        pending = self._opening.get(key)
        if pending is not None:
            return await asyncio.shield(pending[1])
        self._check_capacity(spec)
        future: asyncio.Future[Connection] = asyncio.get_running_loop().create_future()
        self._opening[key] = (spec, future)
        conn = Connection(spec, self.policy, on_spawn=self._spawned, max_input_rounds=self.input_rounds,
                          stdio_discover_s=self.stdio_discover_s, one_post=self.one_post)
        try:
            await conn.open()
        except BaseException as exc:
            future.set_exception(exc if isinstance(exc, Exception) else RuntimeToolError("connect cancelled"))
            future.exception()  # retrieved: no "never retrieved" warning when nobody else waited
            raise
        else:
            self._counters["sessions_opened"] += 1
            self._conns[key] = conn
            future.set_result(conn)
            return conn
        finally:
            self._opening.pop(key, None)

    def _retire(self, conn: Connection) -> None:
        """Take `conn` out of service; close it now or when its last in-flight call returns."""
        if self._conns.get(conn.spec.key) is conn:
            del self._conns[conn.spec.key]
        conn.retired = True
        if not conn.busy:
            self._draining.discard(conn)
            self._background(conn.close())
        else:
            self._draining.add(conn)

    def _background(self, coro: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._bg.add(task)
        task.add_done_callback(self._bg.discard)

    async def _discover(self, spec: ServerSpec) -> Discovery:
        conn = await self._acquire(spec)
        try:
            return await conn.discover()
        except RuntimeToolError:
            if conn.broken is not None:
                self._retire(conn)
            raise

    async def _call(self, spec: ServerSpec, function: str, arguments: dict[str, Any], timeout_s: float,
                    on_progress: ProgressFn | None = None, client_requests: ClientRequests | None = None) -> ToolResult:
        started = time.monotonic()
        result = await self._call_inner(spec, function, arguments, timeout_s, on_progress, client_requests)
        result.cost_ms = int((time.monotonic() - started) * 1000)
        return result

    async def _call_inner(self, spec: ServerSpec, function: str, arguments: dict[str, Any], timeout_s: float,
                          on_progress: ProgressFn | None = None,
                          client_requests: ClientRequests | None = None) -> ToolResult:
        try:
            # A session whose child died (or whose SSE stream ended) while idle is not alive: _acquire replaces it
            # before anything is sent.
            conn = await self._acquire(spec)
        except RuntimeToolError as exc:
            return ToolResult.fail(exc.result_code, exc.message, error_type=exc.code)
        conn.last_used = time.monotonic()
        info = conn.functions.get(function)
        if info is None:
            # The server's list may have grown since we connected: look once more before saying no.
            try:
                info = (await conn.list_now()).get(function)
            except RuntimeToolError as exc:
                self._retire(conn)
                return ToolResult.fail(EXECUTION_ERROR, exc.message, error_type=exc.code)
            if info is None:
                names = ", ".join(sorted(conn.functions)) or "(none)"
                return ToolResult.fail(NOT_FOUND, f"function {function!r} not found; available: {names}")
        try:
            validate_arguments(info.input_schema, arguments)
        except InvalidParams as exc:
            return ToolResult.fail(INVALID_PARAMS, exc.message, **exc.details)
        try:
            result = await conn.call(function, arguments, timeout_s, on_progress, client_requests)
        finally:
            if conn.broken is not None or conn.retired:
                self._retire(conn)
        if result.success or conn.broken is None or not conn.never_reached():
            return result
        return await self._fresh_call(spec, function, arguments, timeout_s, on_progress, client_requests, result)

    async def _fresh_call(self, spec: ServerSpec, function: str, arguments: dict[str, Any], timeout_s: float,
                          on_progress: ProgressFn | None, client_requests: ClientRequests | None,
                          result: ToolResult) -> ToolResult:
        """A remote server restarted (our session is unknown there) or refused the connection: the call never
        ran, so it is tried once more on a fresh session (`result`, the failure, stands if none can be had)."""
        try:
            fresh = await self._acquire(spec)
        except RuntimeToolError:
            return result
        try:
            return await fresh.call(function, arguments, timeout_s, on_progress, client_requests)
        finally:
            if fresh.broken is not None or fresh.retired:
                self._retire(fresh)

    async def _close_tool(self, tool_id: int) -> None:
        victims = [c for k, c in self._conns.items() if k[0] == tool_id]
        for conn in victims:
            del self._conns[conn.spec.key]
        await asyncio.gather(*(c.close() for c in victims), return_exceptions=True)

    async def _close_all(self) -> None:
        victims = list(self._conns.values()) + list(self._draining)
        self._conns.clear()
        self._draining.clear()
        await asyncio.gather(*(c.close() for c in victims), return_exceptions=True)
        if self._bg:
            await asyncio.gather(*list(self._bg), return_exceptions=True)

    async def _stats(self) -> dict[str, Any]:
        tenants: dict[str, int] = {}
        for conn in self._conns.values():
            tenants[conn.spec.tenant_key] = tenants.get(conn.spec.tenant_key, 0) + 1
        return {
            **self._counters,
            "raw_calls": self._raw_sent,
            "open_sessions": len(self._conns),
            "opening": len(self._opening),
            "draining": len(self._draining),
            "tenants": tenants,
        }

    async def _start_reaper(self) -> None:
        self._reaper_task = asyncio.get_running_loop().create_task(self._reaper())

    async def _stop_reaper(self) -> None:
        task, self._reaper_task = self._reaper_task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _reaper(self) -> None:
        while True:
            await asyncio.sleep(max(0.05, min(self.idle_ttl_s / 4, 5.0)))
            try:
                self._reap_once()
            except Exception:  # noqa: BLE001 - the reaper must outlive any one bad entry
                pass

    def _reap_once(self) -> None:
        now = time.monotonic()
        for conn in list(self._conns.values()):
            if not conn.busy and (now - conn.last_used >= self.idle_ttl_s or not conn.alive):
                self._counters["reaped"] += 1
                self._retire(conn)
        for conn in list(self._draining):
            if not conn.busy:
                self._retire(conn)


class _ProcessPool:
    """The process-wide pool and the lock that guards replacing it: one object, not two globals."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pool: SessionPool | None = None


_process = _ProcessPool()


def _same_user_older(other: Key, key: Key) -> bool:
    """`other` is the same user's session of the same tool version, opened with other credentials ("user:<id>@<v>")."""
    return bool(key[2]) and other[1] == key[1] and other[2] != key[2] and other[2].split("@")[0] == key[2].split("@")[0]


def _default_policy() -> OutboundPolicy:
    """The guard with no operator allowlist: the host (tools_app.wiring.pool) configures the pool from its settings;
    the runtime reads no environment of its own."""
    return OutboundPolicy.build("")


def get_pool() -> SessionPool:
    """The process-wide pool (created on first use with the environment's outbound policy)."""
    with _process.lock:
        if _process.pool is None:
            _process.pool = SessionPool(policy=_default_policy())
        return _process.pool


def configure_pool(**kwargs: Any) -> SessionPool:
    """Replace the process-wide pool (closing the old one's sessions); kwargs as SessionPool.__init__."""
    kwargs.setdefault("policy", _default_policy())
    with _process.lock:
        old, _process.pool = _process.pool, SessionPool(**kwargs)
        new = _process.pool
    if old is not None:
        old.shutdown()
    return new


@atexit.register
def _shutdown_at_exit() -> None:
    if _process.pool is not None:
        _process.pool.shutdown()
