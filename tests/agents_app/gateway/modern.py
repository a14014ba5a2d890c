"""The `mcp` SDK's dual-era `Client` against the gateway, with a bearer token: `mode` is `legacy`, `auto` or a
2026-07-28 pin."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client

from core.outbound import ssl_context  # one CA bundle load per process, not one per client (~20 ms each)

MODERN = "2026-07-28"
MODES = ("legacy", "auto", MODERN)


@asynccontextmanager
async def client(url: str, token: str, *, mode: str = MODERN, **kw: Any) -> AsyncIterator[Client]:
    """An entered `Client` (the SDK's own transport over an httpx client carrying the token)."""
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, verify=ssl_context(),
                                  timeout=httpx2.Timeout(30, read=300)) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode, **kw) as connected:
            yield connected
