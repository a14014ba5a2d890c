"""config.asgi's application with the MCP session pool run on uvicorn's own event loop (an experiment of
bench/gateway_eras.py `--pool-on-server-loop`, for issue 36's thread hand-offs; see bench/PROFILE-gateway.md).

On the first HTTP request the process's pool takes the serving loop as its own instead of starting its
`toolhub-mcp-pool` thread: a warm gateway call then wakes two threads (the loop and one worker) instead of three.
It reaches into the pool's private state and runs the pool's blocking steps (a host name's lookup, a LOCAL server's
start) on the serving loop: only for measuring, never for serving. Nothing here is imported by Toolhub.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from config.asgi import application as toolhub
from tools_app.runtime.mcp.pool import SessionPool
from tools_app.wiring.pool import pool

_adopted = False


async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
    global _adopted
    if not _adopted and scope["type"] == "http":
        adopting = pool()
        assert isinstance(adopting, SessionPool), "the experiment needs the in-process pool (no TOOLHUB_RUNNERS)"
        loop = asyncio.get_running_loop()
        with adopting._lock:
            assert adopting._loop is None, "the pool's own loop is already running"
            adopting._loop, adopting._thread = loop, threading.current_thread()
        loop.create_task(adopting._start_reaper())
        _adopted = True
    await toolhub(scope, receive, send)
