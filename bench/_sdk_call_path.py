"""config.asgi's application with the MCP session pool sending every tools/call through the SDK's ClientSession, as
before the one-POST path (tools_app/runtime/mcp/post.py): bench/gateway_eras.py `--sdk-call-path`, the A side of
that A/B within one branch. Nothing here is imported by Toolhub.
"""

from __future__ import annotations

from typing import Any

from config.asgi import application as toolhub
from tools_app.runtime.mcp.pool import SessionPool
from tools_app.wiring.pool import pool

_set = False


async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
    global _set
    if not _set and scope["type"] == "http":
        serving = pool()
        assert isinstance(serving, SessionPool), "the A/B needs the in-process pool (no TOOLHUB_RUNNERS)"
        serving.one_post = False  # read when a connection opens: every session of this process takes the SDK's path
        _set = True
    await toolhub(scope, receive, send)
