"""config.asgi's application with the gateway's tools/call fast path (agents_app/gateway/fastcall.py) turned off for
the requests that carry `x-bench-sdk-server-path`: bench/gateway_eras.py `--ab-fastcall` sends one client of each era
through the fast path and one through the SDK's server path, in turns, to one gateway process. The bench's calls are
sequential (one request in flight), so flipping the setting per request is exact. Nothing here is imported by Toolhub.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

from config.asgi import application as toolhub

HEADER = b"x-bench-sdk-server-path"


async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "http":
        settings.TOOLHUB_MCP_FASTCALL = not any(name == HEADER for name, _ in scope.get("headers", []))
    await toolhub(scope, receive, send)
