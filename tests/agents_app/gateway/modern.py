"""The `mcp` SDK's dual-era `Client` against the gateway, with a bearer token: `mode` is `legacy`, `auto` or a
2026-07-28 pin."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client

from tests import loopback

MODERN = "2026-07-28"
MODES = ("legacy", "auto", MODERN)


@asynccontextmanager
async def client(url: str, token: str, *, mode: str = MODERN, **kw: Any) -> AsyncIterator[Client]:
    """An entered `Client` (the SDK's own transport over an httpx client carrying the token)."""
    async with loopback.async_client(headers={"Authorization": f"Bearer {token}"},
                                     timeout=httpx2.Timeout(30, read=300)) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode, **kw) as connected:
            yield connected
