"""What the MCP gateway adds: a warm tools/call through /mcp/<tenant>/agents/<id>/ vs a direct SDK call to the
same server, and throughput with 32 concurrent gateway clients.

    .venv/bin/python bench/gateway.py [-n 300] [--clients 32] [--calls 20]

Starts uvicorn on config.asgi (dev settings, SQLite in a scratch var dir). Goals (issue 13): p50 within 5 ms of
direct, p95 under 2x direct. The ContextForge comparison of the issue is not run here (it needs Python 3.12).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx2
from _common import ROOT, free_port, pct, scratch_toolhub, summary  # type: ignore[import-not-found]
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

SERVER = ROOT / "toolhub_demo" / "inventory_server.py"
ARGS = {"sku": "DEMO-001"}
WARMUP = 20




async def direct(n: int) -> list[float]:
    params = StdioServerParameters(command=sys.executable, args=[str(SERVER)])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        return await _timed(session, "get_inventory", n)


async def _timed(session: ClientSession, name: str, n: int) -> list[float]:
    for _ in range(WARMUP):
        await session.call_tool(name, ARGS)
    samples = []
    for _ in range(n):
        t = time.perf_counter()
        result = await session.call_tool(name, ARGS)
        samples.append((time.perf_counter() - t) * 1000)
        assert not result.is_error, result
    return samples


@contextmanager
def _session_client(token: str) -> Iterator[httpx2.AsyncClient]:
    yield httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(60, read=300))


async def through_gateway(url: str, token: str, name: str, n: int) -> list[float]:
    with _session_client(token) as http:
        async with http, streamable_http_client(url, http_client=http) as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            return await _timed(session, name, n)


async def concurrent(url: str, token: str, name: str, clients: int, calls: int) -> tuple[float, list[float]]:
    """(calls per second, per-call latencies) of `clients` sessions each making `calls` warm calls at once."""
    start = asyncio.Event()
    latencies: list[float] = []

    async def one() -> None:
        with _session_client(token) as http:
            async with http, streamable_http_client(url, http_client=http) as (read, write), \
                    ClientSession(read, write) as session:
                await session.initialize()
                await session.call_tool(name, ARGS)
                await start.wait()
                for _ in range(calls):
                    t = time.perf_counter()
                    await session.call_tool(name, ARGS)
                    latencies.append((time.perf_counter() - t) * 1000)

    tasks = [asyncio.create_task(one()) for _ in range(clients)]
    await asyncio.sleep(0)
    while sum(1 for t in tasks if t.done()) == 0 and len(latencies) == 0:
        await asyncio.sleep(2)  # let every client connect and warm up
        break
    began = time.perf_counter()
    start.set()
    await asyncio.gather(*tasks)
    return clients * calls / (time.perf_counter() - began), latencies


@contextmanager
def toolhub() -> Iterator[tuple[str, str]]:
    """uvicorn config.asgi:application on a scratch SQLite; yields (base URL, API token) of an owner of `bench`."""
    env, token = scratch_toolhub("bench-gateway")
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "config.asgi:application", "--host", "127.0.0.1",
                             "--port", str(port), "--log-level", "warning"], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        end = time.monotonic() + 60
        while time.monotonic() < end:
            try:
                if httpx2.get(f"{base}/healthz", timeout=2).status_code < 500:
                    break
            except httpx2.HTTPError:
                time.sleep(0.3)
        yield base, token
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)


def setup_agent(base: str, token: str) -> tuple[str, str]:
    """The inventory tool (LOCAL, stdio) and an agent linked to it; (endpoint URL, qualified function name)."""
    api = httpx2.Client(base_url=base, headers={"Authorization": f"Token {token}", "X-Tenant": "bench"}, timeout=60)
    created = api.post("/api/v1/tools/", json={"name": "inventory", "type": "LOCAL", "config": {
        "command": sys.executable, "args": [str(SERVER)], "startup_timeout_s": 60}})
    assert created.status_code == 201, created.text
    tool_id = created.json()["id"]
    assert api.post(f"/api/v1/tools/{tool_id}/refresh/").status_code == 200
    agent = api.post("/api/v1/agents/", json={"name": "bench", "model": None, "tools": [{"tool": tool_id}]})
    assert agent.status_code == 201, agent.text
    return f"{base}/mcp/bench/agents/{agent.json()['id']}/", "inventory__get_inventory"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=300)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--calls", type=int, default=20)
    args = parser.parse_args()
    direct_ms = asyncio.run(direct(args.n))
    print(f"direct SDK call (stdio, warm):     {summary(direct_ms)}")
    with toolhub() as (base, token):
        url, name = setup_agent(base, token)
        gateway_ms = asyncio.run(through_gateway(url, token, name, args.n))
        print(f"through the gateway (warm):        {summary(gateway_ms)}")
        rate, lat = asyncio.run(concurrent(url, token, name, args.clients, args.calls))
        print(f"{args.clients} concurrent gateway clients:    {rate:.1f} calls/s, {summary(lat)}")
    d50, d95, g50, g95 = pct(direct_ms, 50), pct(direct_ms, 95), pct(gateway_ms, 50), pct(gateway_ms, 95)
    print(json.dumps({
        "gateway_minus_direct_p50_ms": round(g50 - d50, 2), "goal_p50_minus_direct_ms": 5,
        "gateway_over_direct_p50": round(g50 / d50, 2),
        "gateway_over_direct_p95": round(g95 / d95, 2), "goal_p95_over_direct": 2,
        "concurrent_clients": args.clients, "gateway_calls_per_s": round(rate, 1),
        "contextforge": "not measured (needs Python 3.12)",
    }))


if __name__ == "__main__":
    main()
