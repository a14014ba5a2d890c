"""Warm invoke latency against the real server-everything (npm) over stdio, streamable HTTP and SSE:
SessionPool.call (sync, through the pool's loop thread) vs. a direct warm SDK ClientSession, side by side.

    .venv/bin/python bench/mcp_real_servers.py [-n 300] [--warmup 20]

Installs the pinned test servers first (`make test-servers` does the same).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from _common import pct, summary
from mcp.client.session import ClientSession
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from core.outbound import OutboundPolicy
from tests.fixtures import real_servers as rs
from tools_app.configs import server_spec
from tools_app.runtime.mcp import SessionPool

FUNCTION, ARGS = "echo", {"message": "bench"}


@asynccontextmanager
async def direct_session(transport: str, url: str) -> AsyncIterator[ClientSession]:
    if transport == "stdio":
        params = StdioServerParameters(command=rs.node(), args=[rs.npm_entry(rs.EVERYTHING), "stdio"])
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            yield session
    elif transport == "sse":
        async with sse_client(url) as (read, write), ClientSession(read, write) as session:
            yield session
    else:
        async with streamable_http_client(url) as (read, write), ClientSession(read, write) as session:
            yield session


async def bench_direct(transport: str, url: str, n: int, warmup: int) -> list[float]:
    async with direct_session(transport, url) as session:
        await session.initialize()
        await session.list_tools()
        for _ in range(warmup):
            await session.call_tool(FUNCTION, ARGS)
        samples = []
        for _ in range(n):
            started = time.perf_counter()
            result = await session.call_tool(FUNCTION, ARGS)
            samples.append((time.perf_counter() - started) * 1000)
            assert not result.is_error
        return samples


def bench_pool(transport: str, url: str, n: int, warmup: int) -> list[float]:
    pool = SessionPool(policy=OutboundPolicy.build("127.0.0.0/8"))
    if transport == "stdio":
        spec = server_spec(tool_id=1, config_version=1, tenant_key="bench", tool_type="LOCAL",
                           config={"command": rs.node(), "args": [rs.npm_entry(rs.EVERYTHING), "stdio"],
                                   "startup_timeout_s": 60})
    else:
        spec = server_spec(tool_id=2, config_version=1, tenant_key="bench", tool_type="REMOTE",
                           config={"url": url, "transport": transport, "timeout_s": 30})
    try:
        for _ in range(warmup):
            assert pool.call(spec, FUNCTION, ARGS).success
        samples = []
        for _ in range(n):
            started = time.perf_counter()
            result = pool.call(spec, FUNCTION, ARGS)
            samples.append((time.perf_counter() - started) * 1000)
            assert result.success, result.error
        return samples
    finally:
        pool.shutdown()


def run(transport: str, url: str, n: int, warmup: int) -> None:
    direct = asyncio.run(bench_direct(transport, url, n, warmup))
    pooled = bench_pool(transport, url, n, warmup)
    direct += asyncio.run(bench_direct(transport, url, n, warmup))  # again, so drift favours neither side
    print(f"[{transport}] direct SDK ClientSession (warm): {summary(direct)}")
    print(f"[{transport}] SessionPool.call (warm, sync):   {summary(pooled)}")
    print(f"[{transport}] ratio pool/direct: p50 {pct(pooled, 50) / pct(direct, 50):.2f}x, "
          f"p95 {pct(pooled, 95) / pct(direct, 95):.2f}x", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-n", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=20)
    args = parser.parse_args()
    outcome: Any = rs.ensure_installed()["npm"]
    if not outcome.ok:
        raise SystemExit(f"server-everything is not installed: {outcome.reason}")
    run("stdio", "", args.n, args.warmup)
    for transport, served in (("streamable_http", "streamableHttp"), ("sse", "sse")):
        with rs.everything_http(served) as (url, _proc):
            run(transport, url, args.n, args.warmup)


if __name__ == "__main__":
    main()
