"""A warm tools/call through the gateway for a 2025 client and a 2026-07-28 client, side by side with the same call
direct to the upstream, in one run; `--profile` also keeps a cProfile of the gateway process.

    .venv/bin/python bench/gateway_eras.py [-n 300] [--profile bench/profiles/gateway]

Toolhub on uvicorn (config.asgi, one worker, DEBUG off, scratch SQLite) serves an agent linked to a REMOTE tool:
the inventory server on streamable HTTP on loopback. Three warm SDK `Client`s on one event loop: direct to the
upstream (`mode="auto"`), through the gateway in `mode="legacy"` (a 2025 session) and in `mode="2026-07-28"`
(sessionless). Samples are taken in turns (one call each, the order rotating) so all three see the same machine:
on a shared two-CPU box the load moves by the second, so the ratios matter more than the absolute numbers.
Goal (issue 36): each era's p50 within direct + 3 ms.

With `--profile PREFIX` the gateway process runs under cProfile (every thread: the event loop and the worker
threads the database work hops to) for the timed calls only, one era at a time; PREFIX-2025.prof / PREFIX-2026.prof
and a top-40 text of each (by cumulative time, per call) are written, with the count of SQL statements and Redis
commands per call.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import gateway as bench_gateway
import httpx2
from _common import pct, summary
from gateway import ARGS, http_upstream, setup_agent
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client

WARMUP = 30
PROFILED_APP = "bench._profiled_asgi:application"


@contextmanager
def toolhub(profile: str | None) -> Iterator[tuple[str, str]]:
    """uvicorn serving Toolhub (profiled when asked); yields (base URL, an owner's API token)."""
    with bench_gateway.toolhub(app=PROFILED_APP if profile else "config.asgi:application", name="bench-gateway-eras",
                               env_extra={"BENCH_PROFILE_PREFIX": str(Path(profile).resolve())} if profile else None,
                               quiet=False) as served:
        yield served


@asynccontextmanager
async def connected(url: str, token: str | None, mode: str) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(60, read=300)) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:
            yield client


async def _profiling(base: str, token: str, label: str | None) -> None:
    """Start (label) or stop and write (None) the gateway process's profile (bench/_profiled_asgi.py)."""
    async with httpx2.AsyncClient(timeout=60) as http:
        resp = await http.post(f"{base}/__bench_profile__", json={"label": label},
                               headers={"Authorization": f"Bearer {token}"})
        resp.raise_for_status()


async def run(upstream: str, gateway: str, name: str, token: str, n: int, base: str, profile: bool
              ) -> dict[str, list[float]]:
    async with AsyncExitStack() as stack:
        clients = {
            "direct": (await stack.enter_async_context(connected(upstream, None, "auto")), "get_inventory"),
            "2025": (await stack.enter_async_context(connected(gateway, token, "legacy")), name),
            "2026": (await stack.enter_async_context(connected(gateway, token, "2026-07-28")), name),
        }
        for label, (client, _tool) in clients.items():
            print(f"  {label}: negotiated {client.protocol_version}")

        async def once(label: str) -> float:
            client, tool = clients[label]
            started = time.perf_counter()
            result = await client.call_tool(tool, ARGS)
            took = (time.perf_counter() - started) * 1000
            assert not result.is_error, result
            return took

        for _ in range(WARMUP):
            for label in clients:
                await once(label)
        samples: dict[str, list[float]] = {label: [] for label in clients}
        order = list(clients)
        for i in range(n):
            turn = order[i % 3:] + order[:i % 3]
            for label in turn:
                samples[label].append(await once(label))
        if profile:
            for era in ("2025", "2026"):
                await _profiling(base, token, era)
                for _ in range(n):
                    await once(era)
                await _profiling(base, token, None)
        return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=300)
    parser.add_argument("--profile", metavar="PREFIX", help="keep a cProfile of the gateway process per era")
    args = parser.parse_args()
    print(f"load average at start: {' '.join(open('/proc/loadavg').read().split()[:3])} "
          f"({os.cpu_count()} CPUs, shared)")
    with toolhub(args.profile) as (base, token), http_upstream() as upstream:
        gateway_url, name = setup_agent(base, token, name="inventory_http", tool_type="REMOTE",
                                        config={"url": upstream, "transport": "streamable_http"})
        samples = asyncio.run(run(upstream, gateway_url, name, token, args.n, base, bool(args.profile)))
    direct = pct(samples["direct"], 50)
    out: dict[str, Any] = {"direct_p50_ms": round(direct, 2), "goal_minus_direct_p50_ms": 3}
    print(f"direct to the upstream (SDK Client, warm):  {summary(samples['direct'])}")
    for era in ("2025", "2026"):
        p50 = pct(samples[era], 50)
        print(f"through the gateway, {era} client:          {summary(samples[era])}")
        print(f"  {era} - direct p50: {p50 - direct:+.2f} ms, ratio {p50 / direct:.2f}x")
        out.update({f"gateway_{era}_p50_ms": round(p50, 2), f"gateway_{era}_p95_ms": round(pct(samples[era], 95), 2),
                    f"gateway_{era}_minus_direct_p50_ms": round(p50 - direct, 2),
                    f"gateway_{era}_over_direct_p50": round(p50 / direct, 2)})
    print(json.dumps(out))
    print(f"load average at end: {' '.join(open('/proc/loadavg').read().split()[:3])}")


if __name__ == "__main__":
    main()
