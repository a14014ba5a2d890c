"""Warm tools/call through Toolhub's pool for a 2025 and a 2026-07-28 upstream, side by side with a direct SDK call.

    .venv/bin/python bench/mcp_eras.py [-n 300]

Two copies of the inventory server on streamable HTTP on loopback: one answering only the 2025 handshake
(`--legacy-only`), one the SDK's dual-era server (which Toolhub reaches as 2026-07-28). For each: the SDK `Client`
direct (`mode="legacy"` / `mode="2026-07-28"`) and Toolhub's `SessionPool.call` (sync, as invoke makes it), samples
taken in turns (one call each, order alternating) so both see the same machine.
"""

from __future__ import annotations

import argparse
import asyncio
import threading
import time
from typing import Any

from _common import pct, summary
from mcp.client.client import Client

from core.outbound import OutboundPolicy
from tests.fixtures.mcp_servers import http_server
from tools_app.configs import server_spec as spec_from_config
from tools_app.runtime.mcp import SessionPool

ARGS = {"sku": "DEMO-001"}


class DirectClient:
    """A warm SDK Client on a loop thread of its own, called synchronously like the pool."""

    def __init__(self, url: str, mode: str) -> None:
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        self.client = Client(url, mode=mode)
        self._opened: Any = asyncio.run_coroutine_threadsafe(self._own(), self.loop)
        while not hasattr(self, "protocol_version"):
            if self._opened.done():
                self._opened.result()
            time.sleep(0.01)

    async def _own(self) -> None:
        """Enter and leave the client in one task (anyio's scopes need that); lives until close()."""
        self._stop = asyncio.Event()
        async with self.client:
            self.protocol_version = self.client.protocol_version
            await self._stop.wait()

    def call(self) -> None:
        result = asyncio.run_coroutine_threadsafe(self.client.call_tool("get_inventory", ARGS), self.loop).result(30)
        assert not result.is_error

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self._stop.set)
        self._opened.result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)


def timed(fn: Any) -> float:
    started = time.perf_counter()
    fn()
    return (time.perf_counter() - started) * 1000


def side_by_side(label: str, url: str, mode: str, pool: SessionPool, tool_id: int, n: int) -> None:
    spec = spec_from_config(tool_id=tool_id, config_version=1, tenant_key="bench", tool_type="REMOTE",
                            config={"url": url, "timeout_s": 30})
    found = pool.probe(spec)
    direct = DirectClient(url, mode)

    def via_pool() -> None:
        assert pool.call(spec, "get_inventory", ARGS).success

    for _ in range(20):
        via_pool()
        direct.call()
    pooled: list[float] = []
    sdk: list[float] = []
    for i in range(n):
        if i % 2:
            pooled.append(timed(via_pool))
            sdk.append(timed(direct.call))
        else:
            sdk.append(timed(direct.call))
            pooled.append(timed(via_pool))
    direct.close()
    print(f"{label}: Toolhub negotiated {found.protocol_version}, direct SDK {direct.protocol_version}")
    print(f"  direct SDK Client (warm):    {summary(sdk)}")
    print(f"  Toolhub SessionPool.call:    {summary(pooled)}")
    print(f"  pool - direct p50: {pct(pooled, 50) - pct(sdk, 50):+.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-n", type=int, default=300)
    args = parser.parse_args()
    pool = SessionPool(policy=OutboundPolicy.build("127.0.0.0/8"))
    try:
        with http_server(extra_args=("--legacy-only",)) as legacy_url, http_server() as modern_url:
            side_by_side("2025 upstream", legacy_url, "legacy", pool, 1, args.n)
            side_by_side("2026 upstream", modern_url, "2026-07-28", pool, 2, args.n)
    finally:
        pool.shutdown()


if __name__ == "__main__":
    main()
