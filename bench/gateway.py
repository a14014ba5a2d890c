"""What the MCP gateway adds: a warm tools/call through /mcp/<tenant>/agents/<id>/ vs a direct SDK call to the
same server, and throughput with 32 concurrent gateway clients; then the same side by side with IBM
ContextForge 1.1.0's virtual server (/servers/<id>/mcp) over one streamable-HTTP upstream.

    .venv/bin/python bench/gateway.py [-n 300] [--clients 32] [--calls 20] [--no-contextforge]

Part 1 (stdio upstream): Toolhub's LOCAL tool through the gateway vs the direct stdio SDK call. Part 2 (HTTP
upstream: the inventory server on streamable HTTP on loopback): the direct SDK call, Toolhub's REMOTE tool
through the gateway and ContextForge's virtual server, tools/list and tools/call, and 32 concurrent clients.
ContextForge runs on Python 3.12 from PyPI (found or installed into var/contextforge by bench/_contextforge.py;
skipped with the reason when it cannot be had), one uvicorn worker on SQLite like Toolhub here.
Both servers start on uvicorn with one worker (Toolhub: config.asgi, dev settings with DEBUG off as in production,
SQLite in a scratch var dir). Part 1 takes its direct and gateway samples in turns (one call each, the order
alternating), so both see the same machine: on a shared two-CPU box the load moves by the second.
Goals: p50 within 5 ms of direct, p95 under 2x direct; 32 clients: >= 5x ContextForge's throughput.
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
from typing import Any

import httpx2
from _common import ROOT, free_port, pct, scratch_toolhub, summary
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

SERVER = ROOT / "toolhub_demo" / "inventory_server.py"
ARGS = {"sku": "DEMO-001"}
WARMUP = 20


async def _timed(session: ClientSession, name: str, n: int, *, listing: bool = False) -> list[float]:
    async def once() -> None:
        if listing:
            tools = await session.list_tools()
            assert any(t.name == name for t in tools.tools), tools
        else:
            result = await session.call_tool(name, ARGS)
            assert not result.is_error, result

    for _ in range(WARMUP):
        await once()
    samples = []
    for _ in range(n):
        t = time.perf_counter()
        await once()
        samples.append((time.perf_counter() - t) * 1000)
    return samples


async def direct_and_gateway(url: str, token: str, name: str, n: int) -> tuple[list[float], list[float]]:
    """Warm tools/call samples of the direct stdio session and the gateway session, taken in turns."""
    params = StdioServerParameters(command=sys.executable, args=[str(SERVER)])
    with _session_client(token) as http:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as direct, http, \
                streamable_http_client(url, http_client=http) as (gread, gwrite), \
                ClientSession(gread, gwrite) as gateway:
            await direct.initialize()
            await gateway.initialize()
            pairs = [(direct, "get_inventory"), (gateway, name)]
            for _ in range(WARMUP):
                for session, tool in pairs:
                    assert not (await session.call_tool(tool, ARGS)).is_error
            samples: tuple[list[float], list[float]] = ([], [])
            for i in range(n):
                for which in ((0, 1) if i % 2 == 0 else (1, 0)):
                    session, tool = pairs[which]
                    t = time.perf_counter()
                    result = await session.call_tool(tool, ARGS)
                    samples[which].append((time.perf_counter() - t) * 1000)
                    assert not result.is_error, result
            return samples


@contextmanager
def _session_client(token: str | None) -> Iterator[httpx2.AsyncClient]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    yield httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(60, read=300))


async def over_http(url: str, token: str | None, name: str, n: int, *, lists: bool = False) -> dict[str, list[float]]:
    """Warm tools/call (and tools/list) samples over one streamable-HTTP session."""
    with _session_client(token) as http:
        async with http, streamable_http_client(url, http_client=http) as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            out = {"call": await _timed(session, name, n)}
            if lists:
                out["list"] = await _timed(session, name, n, listing=True)
            return out


async def concurrent(url: str, token: str | None, name: str, clients: int, calls: int) -> tuple[float, list[float]]:
    """(calls per second, per-call latencies) of `clients` sessions each making `calls` warm calls at once."""
    start = asyncio.Event()
    ready = 0
    latencies: list[float] = []

    async def one() -> None:
        nonlocal ready
        with _session_client(token) as http:
            async with http, streamable_http_client(url, http_client=http) as (read, write), \
                    ClientSession(read, write) as session:
                await session.initialize()
                await session.call_tool(name, ARGS)
                ready += 1
                await start.wait()
                for _ in range(calls):
                    t = time.perf_counter()
                    result = await session.call_tool(name, ARGS)
                    latencies.append((time.perf_counter() - t) * 1000)
                    assert not result.is_error, result

    tasks = [asyncio.create_task(one()) for _ in range(clients)]
    end = time.monotonic() + 120
    while ready < clients and time.monotonic() < end and not any(t.done() for t in tasks):
        await asyncio.sleep(0.05)  # every client connected and warm before the clock starts
    began = time.perf_counter()
    start.set()
    await asyncio.gather(*tasks)
    return clients * calls / (time.perf_counter() - began), latencies


def _wait_up(url: str, proc: subprocess.Popen[bytes] | None = None) -> None:
    end = time.monotonic() + 60
    while time.monotonic() < end:
        if proc is not None and proc.poll() is not None:
            raise SystemExit(f"{url}: the server exited ({proc.returncode})")
        try:
            httpx2.get(url, timeout=2)
            return
        except httpx2.HTTPError:
            time.sleep(0.2)
    raise SystemExit(f"{url} did not come up")


@contextmanager
def toolhub(*, app: str = "config.asgi:application", name: str = "bench-gateway", env_extra: dict[str, str] | None = None,
            quiet: bool = True) -> Iterator[tuple[str, str]]:
    """uvicorn serving `app` on a scratch SQLite; yields (base URL, API token) of an owner of `bench`."""
    env, token = scratch_toolhub(name)
    env["DEBUG"] = "0"  # production runs without DEBUG's per-query bookkeeping (dev settings default it on)
    env.update(env_extra or {})
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "uvicorn", app, "--host", "127.0.0.1",
                             "--port", str(port), "--log-level", "warning"], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL if quiet else None,
                            start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_up(f"{base}/healthz", proc)
        yield base, token
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)


@contextmanager
def http_upstream() -> Iterator[str]:
    """The inventory server on streamable HTTP on loopback; yields its /mcp URL."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(SERVER), "--transport", "streamable-http", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        _wait_up(f"http://127.0.0.1:{port}/mcp", proc)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)


def setup_agent(base: str, token: str, *, name: str, config: dict[str, Any], tool_type: str) -> tuple[str, str]:
    """A tool and an agent linked to it; (the agent's endpoint URL, the qualified function name)."""
    api = httpx2.Client(base_url=base, headers={"Authorization": f"Token {token}", "X-Tenant": "bench"}, timeout=60)
    created = api.post("/api/v1/tools/", json={"name": name, "type": tool_type, "config": config})
    assert created.status_code == 201, created.text
    tool_id = created.json()["id"]
    refreshed = api.post(f"/api/v1/tools/{tool_id}/refresh/")
    assert refreshed.status_code == 200 and refreshed.json().get("ok"), refreshed.text
    agent = api.post("/api/v1/agents/", json={"name": f"bench-{name}", "model": None, "tools": [{"tool": tool_id}]})
    assert agent.status_code == 201, agent.text
    return f"{base}/mcp/bench/agents/{agent.json()['id']}/", f"{name}__get_inventory"


def part_stdio(args: argparse.Namespace, base: str, token: str) -> dict[str, Any]:
    url, name = setup_agent(base, token, name="inventory", tool_type="LOCAL",
                            config={"command": sys.executable, "args": [str(SERVER)], "startup_timeout_s": 60})
    direct_ms, gateway_ms = asyncio.run(direct_and_gateway(url, token, name, args.n))
    print(f"direct SDK call (stdio, warm):              {summary(direct_ms)}")
    print(f"Toolhub gateway, LOCAL tool (warm):         {summary(gateway_ms)}")
    rate, lat = asyncio.run(concurrent(url, token, name, args.clients, args.calls))
    print(f"Toolhub, {args.clients} concurrent clients:            {rate:.1f} calls/s, {summary(lat)}")
    d50, d95, g50, g95 = pct(direct_ms, 50), pct(direct_ms, 95), pct(gateway_ms, 50), pct(gateway_ms, 95)
    return {
        "upstream": "stdio",
        "direct_p50_ms": round(d50, 2), "gateway_p50_ms": round(g50, 2), "gateway_p95_ms": round(g95, 2),
        "gateway_minus_direct_p50_ms": round(g50 - d50, 2), "goal_p50_minus_direct_ms": 5,
        "gateway_over_direct_p50": round(g50 / d50, 2),
        "gateway_over_direct_p95": round(g95 / d95, 2), "goal_p95_over_direct": 2,
        "concurrent_clients": args.clients, "gateway_calls_per_s": round(rate, 1),
    }


def part_http(args: argparse.Namespace, base: str, token: str) -> dict[str, Any]:
    import _contextforge

    out: dict[str, Any] = {"upstream": "streamable_http"}
    with http_upstream() as upstream:
        direct = asyncio.run(over_http(upstream, None, "get_inventory", args.n, lists=True))
        print(f"direct SDK (HTTP upstream) tools/call:      {summary(direct['call'])}")
        print(f"direct SDK (HTTP upstream) tools/list:      {summary(direct['list'])}")
        url, name = setup_agent(base, token, name="inventory_http", tool_type="REMOTE",
                                config={"url": upstream, "transport": "streamable_http"})
        toolhub_ms = asyncio.run(over_http(url, token, name, args.n, lists=True))
        print(f"Toolhub gateway tools/call:                 {summary(toolhub_ms['call'])}")
        print(f"Toolhub gateway tools/list:                 {summary(toolhub_ms['list'])}")
        toolhub_rate, lat = asyncio.run(concurrent(url, token, name, args.clients, args.calls))
        print(f"Toolhub, {args.clients} concurrent clients:            {toolhub_rate:.1f} calls/s, {summary(lat)}")
        d_call, d_list = pct(direct["call"], 50), pct(direct["list"], 50)
        t_call, t_list = pct(toolhub_ms["call"], 50), pct(toolhub_ms["list"], 50)
        out.update({"direct_call_p50_ms": round(d_call, 2), "direct_list_p50_ms": round(d_list, 2),
                    "toolhub_call_p50_ms": round(t_call, 2), "toolhub_list_p50_ms": round(t_list, 2),
                    "toolhub_call_over_direct_p50": round(t_call / d_call, 2),
                    "toolhub_list_over_direct_p50": round(t_list / d_list, 2),
                    "toolhub_calls_per_s": round(toolhub_rate, 1)})
        if not args.contextforge:
            out["contextforge"] = "skipped (--no-contextforge)"
            return out
        executable, how = _contextforge.find_or_install()
        if executable is None:
            print(f"ContextForge skipped: {how}")
            out["contextforge"] = f"skipped: {how}"
            return out
        print(f"ContextForge {_contextforge.VERSION}: {how}; starting it (SQLite, one worker) ...", flush=True)
        try:
            with _contextforge.running(executable, upstream) as cf:
                cf_ms = asyncio.run(over_http(cf.server_url, cf.token, cf.tool_name, args.n, lists=True))
                print(f"ContextForge tools/call:                    {summary(cf_ms['call'])}")
                print(f"ContextForge tools/list:                    {summary(cf_ms['list'])}")
                cf_rate, lat = asyncio.run(concurrent(cf.server_url, cf.token, cf.tool_name, args.clients,
                                                      args.calls))
                print(f"ContextForge, {args.clients} concurrent clients:       {cf_rate:.1f} calls/s, {summary(lat)}")
        except RuntimeError as exc:
            print(f"ContextForge skipped: it did not start or register the server: {exc}")
            out["contextforge"] = f"skipped: {str(exc).splitlines()[0]}"
            return out
        c_call, c_list = pct(cf_ms["call"], 50), pct(cf_ms["list"], 50)
        out.update({"contextforge": _contextforge.VERSION,
                    "contextforge_call_p50_ms": round(c_call, 2), "contextforge_list_p50_ms": round(c_list, 2),
                    "contextforge_call_over_direct_p50": round(c_call / d_call, 2),
                    "contextforge_list_over_direct_p50": round(c_list / d_list, 2),
                    "contextforge_over_toolhub_call_p50": round(c_call / t_call, 2),
                    "contextforge_over_toolhub_list_p50": round(c_list / t_list, 2),
                    "contextforge_calls_per_s": round(cf_rate, 1),
                    "toolhub_over_contextforge_throughput": round(toolhub_rate / cf_rate, 2),
                    "goal_toolhub_over_contextforge_throughput": 5})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=300)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--no-contextforge", dest="contextforge", action="store_false",
                        help="leave ContextForge out of part 2")
    parser.add_argument("--parts", default="stdio,http", help="stdio, http or both (default)")
    args = parser.parse_args()
    with toolhub() as (base, token):
        print(f"load average at start: {' '.join(open('/proc/loadavg').read().split()[:3])}")
        results = []
        if "stdio" in args.parts:
            results.append(part_stdio(args, base, token))
        if "http" in args.parts:
            results.append(part_http(args, base, token))
    for result in results:
        print(json.dumps(result))
    print(f"load average at end: {' '.join(open('/proc/loadavg').read().split()[:3])}")


if __name__ == "__main__":
    main()
