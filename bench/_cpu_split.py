"""config.asgi's application with the warm call's parts timed in thread CPU (time.thread_time, inclusive of what each
calls): the fast path's worker job and, inside it, the gateway's checks, the invoke service's checks, the upstream
call (the raw POST), the result screen, the audit row and the rendering; on the loop, the fast path's whole answer.
GET /__bench_cpu__ gives {part: [calls, ms]} so far. bench/gateway_eras.py `--cpu-split` prints them per call of
each kind in the counting phase. cProfile's shares (--profile) inflate Python-heavy parts; this does not.
Nothing here is imported by Toolhub.
"""

from __future__ import annotations

import functools
import threading
import time
from typing import Any

from bench._common import send_json
from config.asgi import application as toolhub

PATH = "/__bench_cpu__"
_totals: dict[str, list[float]] = {}
_lock = threading.Lock()


def _add(part: str, started: float) -> None:
    """One more call of `part`, and the thread CPU it took since `started`."""
    took = (time.thread_time() - started) * 1000
    with _lock:
        total = _totals.setdefault(part, [0, 0.0])
        total[0] += 1
        total[1] += took


def _timed(part: str, fn: Any) -> Any:
    @functools.wraps(fn)
    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.thread_time()
        try:
            return fn(*args, **kwargs)
        finally:
            _add(part, started)
    return timed


def _atimed(part: str, fn: Any) -> Any:
    """A coroutine's own CPU on the loop's thread (its awaits' waits excluded: thread time)."""
    @functools.wraps(fn)
    async def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.thread_time()
        try:
            return await fn(*args, **kwargs)
        finally:
            _add(part, started)
    return timed


def _install() -> None:
    from agents_app.gateway import calls, fastcall, server
    from tools_app.runtime.mcp import pool, rawpost
    from tools_app.services import audit, invoke

    # (owner, attribute, part): each replaced by a timed wrapper of itself (setattr: these are patches by name).
    parts: list[tuple[Any, str, str]] = [
        (fastcall, "_job", "job (worker, all)"),
        (server, "close_old_connections", "close_old_connections x2"),
        (server, "_rendered", "render the result"),
        (calls, "throttle", "throttle"),
        (calls, "listing", "listing (calls)"),
        (calls, "tool_invoke", "tool_invoke (service, all)"),
        (invoke, "check_callable", "check_callable"),
        (invoke, "screened", "result screen"),
        (invoke, "audit", "audit row (all)"),
        (audit, "insert", "audit INSERT"),
        (pool.SessionPool, "call", "pool.call (upstream, all)"),
        (rawpost.RawPost, "_request", "raw: request build"),
        (rawpost.RawPost, "_read", "raw: read answer"),
        (rawpost.RawPost, "_outcome", "raw: result checks"),
        (pool, "validate_arguments", "raw: argument validation"),
    ]
    for owner, name, part in parts:
        setattr(owner, name, _timed(part, getattr(owner, name)))
    fastcall.FastCalls._answer = _atimed(  # type: ignore[method-assign]
        "fast answer (loop, its own CPU)", fastcall.FastCalls._answer)


_install()


async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "http" and scope["path"] == PATH:
        with _lock:
            totals = {part: list(total) for part, total in _totals.items()}
        await send_json(send, totals)
        return
    await toolhub(scope, receive, send)
