"""Warm tools/call latency: through SessionPool (sync, loop thread) vs. a direct warm SDK ClientSession."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

from _common import summary
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from core.outbound import OutboundPolicy
from tests.fixtures.mcp_servers import INVENTORY, PYTHON
from tools_app.configs import server_spec as spec_from_config
from tools_app.runtime.mcp import SessionPool

ARGS = {"sku": "DEMO-001"}


def bench_pool(n: int, warmup: int) -> list[float]:
    pool = SessionPool(policy=OutboundPolicy.build(""))
    spec = spec_from_config(
        tool_id=1, config_version=1, tenant_key="bench", tool_type="LOCAL",
        config={"command": PYTHON, "args": [str(INVENTORY)], "startup_timeout_s": 60},
    )
    try:
        for _ in range(warmup):
            assert pool.call(spec, "get_inventory", ARGS).success
        samples = []
        for _ in range(n):
            started = time.perf_counter()
            result = pool.call(spec, "get_inventory", ARGS)
            samples.append((time.perf_counter() - started) * 1000)
            assert result.success
        assert pool.stats()["sessions_opened"] == 1
        return samples
    finally:
        pool.shutdown()


async def bench_direct(n: int, warmup: int) -> list[float]:
    params = StdioServerParameters(command=PYTHON, args=[str(INVENTORY)])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        await session.list_tools()
        for _ in range(warmup):
            await session.call_tool("get_inventory", ARGS)
        samples = []
        for _ in range(n):
            started = time.perf_counter()
            result = await session.call_tool("get_inventory", ARGS)
            samples.append((time.perf_counter() - started) * 1000)
            assert not result.is_error
        return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-n", type=int, default=500)
    parser.add_argument("--warmup", type=int, default=20)
    args = parser.parse_args()
    direct = asyncio.run(bench_direct(args.n, args.warmup))
    pooled = bench_pool(args.n, args.warmup)
    direct2 = asyncio.run(bench_direct(args.n, args.warmup))  # again, so drift does not favour one side
    direct_all = direct + direct2
    print(f"direct SDK ClientSession (warm): {summary(direct_all)}")
    print(f"SessionPool.call (warm, sync):   {summary(pooled)}")
    from _common import pct

    print(
        f"ratio pool/direct: p50 {pct(pooled, 50) / pct(direct_all, 50):.2f}x, "
        f"p95 {pct(pooled, 95) / pct(direct_all, 95):.2f}x"
    )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
