"""The `mcp` Python SDK client against the gateway: streamable HTTP or SSE, with a bearer token."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
from mcp.client.session import ClientSession
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client

from core.outbound import ssl_context  # one CA bundle load per process, not one per client (~20 ms each)


@asynccontextmanager
async def connect(url: str, token: str, *, transport: str = "streamable_http", **session_kw: Any
                  ) -> AsyncIterator[tuple[ClientSession, Any]]:
    """An initialized ClientSession and its initialize result."""
    headers = {"Authorization": f"Bearer {token}"}
    if transport == "sse":
        async with sse_client(url.rstrip("/") + "/sse", headers=headers) as (read, write):
            async with ClientSession(read, write, **session_kw) as session:
                yield session, await session.initialize()
        return
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300), verify=ssl_context()) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write, **session_kw) as session:
                yield session, await session.initialize()


def refusal(result: Any) -> dict[str, Any]:
    """Toolhub's typed refusal in a tools/call result (`_meta["toolhub/refusal"]`: error_code, approval_id, ...)."""
    typed: dict[str, Any] = (result.meta or {})["toolhub/refusal"]
    return typed
