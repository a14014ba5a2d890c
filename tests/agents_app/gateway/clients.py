"""The `mcp` Python SDK client against the gateway: streamable HTTP or SSE, with a bearer token."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
from mcp.client.session import ClientSession
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT

from tests import loopback


def sse_http_client(headers: dict[str, str] | None = None, timeout: httpx2.Timeout | None = None,
                    auth: httpx2.Auth | None = None) -> httpx2.AsyncClient:
    """`sse_client`'s client factory: the SDK's default one (`create_mcp_http_client`), with the shared TLS context."""
    return loopback.async_client(headers=headers, auth=auth,
                                 timeout=timeout or httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT))


@asynccontextmanager
async def connect(url: str, token: str, *, transport: str = "streamable_http", **session_kw: Any
                  ) -> AsyncIterator[tuple[ClientSession, Any]]:
    """An initialized ClientSession and its initialize result."""
    headers = {"Authorization": f"Bearer {token}"}
    if transport == "sse":
        async with sse_client(url.rstrip("/") + "/sse", headers=headers,
                              httpx_client_factory=sse_http_client) as (read, write):
            async with ClientSession(read, write, **session_kw) as session:
                yield session, await session.initialize()
        return
    async with loopback.async_client(headers=headers, timeout=httpx2.Timeout(30, read=300)) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write, **session_kw) as session:
                yield session, await session.initialize()


def refusal(result: Any) -> dict[str, Any]:
    """Toolhub's typed refusal in a tools/call result (`_meta["toolhub/refusal"]`: error_code, approval_id, ...)."""
    typed: dict[str, Any] = (result.meta or {})["toolhub/refusal"]
    return typed
