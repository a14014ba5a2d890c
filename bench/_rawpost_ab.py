"""config.asgi's application with the MCP session pool's raw path (tools_app/runtime/mcp/rawpost.py: a warm 2026
upstream tools/call sent from the worker thread) turned off for the requests that carry `x-bench-loop-call-path`:
bench/gateway_eras.py `--ab-rawpost` sends one client of each era through the raw path and one through the pool's loop,
in turns, to one gateway process. The bench's calls are sequential (one request in flight) and SessionPool.call reads
`raw_post` per call, so flipping it per request is exact. Nothing here is imported by Toolhub.
"""

from __future__ import annotations

from typing import Any

from config.asgi import application as toolhub
from tools_app.runtime.mcp.pool import SessionPool
from tools_app.wiring.pool import pool

HEADER = b"x-bench-loop-call-path"


async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "http" and scope.get("path", "").startswith("/mcp"):
        serving = pool()
        assert isinstance(serving, SessionPool), "the A/B needs the in-process pool (no TOOLHUB_RUNNERS)"
        serving.raw_post = not any(name == HEADER for name, _ in scope.get("headers", []))
    await toolhub(scope, receive, send)
