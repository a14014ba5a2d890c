"""What the API adds on top of the tool: warm invoke through POST /tools/{id}/invoke/ vs a direct warm SDK call,
and GET /tools/{id}/ vs a bare Django view (/healthz), on the dev server and on the production server.

    .venv/bin/python bench/api_overhead.py [-n 300] [--targets runserver,prod]

`prod` needs PostgreSQL and Redis (it runs deploy/prod_local.py). Goals (issue 16): invoke p50 within 5 ms of
the direct SDK call; GET /tools/{id}/ p50 within 2x the bare view.

On the dev server every request is sent with `Connection: close`: runserver writes a response's headers and
body in two small writes on a socket without TCP_NODELAY, so on a kept-alive connection the body waits for
the client's delayed ACK (~40 ms on Linux) whatever the view does; that stall is the dev server's, not the
API's. The production server (uvicorn) sets TCP_NODELAY and is measured on one kept-alive connection.
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
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import httpx2
from _common import ROOT, free_port, pct, prod_topology, scratch_toolhub, summary  # type: ignore[import-not-found]
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

SERVER = ROOT / "toolhub_demo" / "inventory_server.py"
ARGS = {"sku": "DEMO-001"}




async def direct(n: int) -> list[float]:
    params = StdioServerParameters(command=sys.executable, args=[str(SERVER)])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        for _ in range(20):
            await session.call_tool("get_inventory", ARGS)
        samples = []
        for _ in range(n):
            t = time.perf_counter()
            result = await session.call_tool("get_inventory", ARGS)
            samples.append((time.perf_counter() - t) * 1000)
            assert not result.is_error
        return samples


def timed(n: int, fn: Callable[[], None]) -> list[float]:
    for _ in range(20):
        fn()
    samples = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t) * 1000)
    return samples


def wait_up(url: str) -> None:
    end = time.monotonic() + 60
    while time.monotonic() < end:
        try:
            if httpx2.get(url, timeout=2).status_code < 500:
                return
        except httpx2.HTTPError:
            pass
        time.sleep(0.3)
    raise SystemExit(f"{url} did not come up")


@contextmanager
def runserver() -> Iterator[tuple[str, str, str]]:
    """The dev server (manage.py runserver, SQLite) in a scratch var dir; yields (base, token, tenant)."""
    env, token = scratch_toolhub("bench-api")
    port = free_port()
    proc = subprocess.Popen([sys.executable, "manage.py", "runserver", "--noreload", f"127.0.0.1:{port}"], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_up(f"http://127.0.0.1:{port}/healthz")
        yield f"http://127.0.0.1:{port}", token, "bench"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)


@contextmanager
def production() -> Iterator[tuple[str, str, str]]:
    """deploy/prod_local.py (gunicorn + uvicorn workers, PostgreSQL, Redis); yields (base of web A, token, tenant)."""
    # The invoke throttle (600/min by default) is lifted as on the dev server: 2 x 320 calls in a minute, and
    # its history in Redis outlives a --fresh database, would otherwise be refused by the next run.
    with prod_topology(db="toolhub_bench", redis_db=11, env={"TOOLHUB_THROTTLE_INVOKE": "1000000/min"}) as (hosts, token):
        yield hosts[0], token, "prod"


def measure(base: str, token: str, tenant: str, n: int, *, keep_alive: bool = True) -> dict[str, list[float]]:
    headers = {"Authorization": f"Token {token}", "X-Tenant": tenant}
    if not keep_alive:
        headers["Connection"] = "close"
    client = httpx2.Client(base_url=base, headers=headers, timeout=60)
    name = f"bench-inventory-{os.getpid()}"
    created = client.post("/api/v1/tools/", json={"name": name, "type": "LOCAL", "config": {
        "command": sys.executable, "args": [str(SERVER)], "startup_timeout_s": 60}})
    assert created.status_code == 201, created.text
    tool_id = created.json()["id"]
    refreshed = client.post(f"/api/v1/tools/{tool_id}/refresh/")
    assert refreshed.status_code == 200, refreshed.text
    body = {"function": "get_inventory", "arguments": ARGS}

    def invoke() -> None:
        r = client.post(f"/api/v1/tools/{tool_id}/invoke/", json=body)
        assert r.status_code == 200 and r.json()["success"], r.text

    def detail() -> None:
        assert client.get(f"/api/v1/tools/{tool_id}/").status_code == 200

    def bare() -> None:
        assert client.get("/healthz").status_code == 200

    try:
        return {"invoke": timed(n, invoke), "detail": timed(n, detail), "bare": timed(n, bare)}
    finally:
        client.delete(f"/api/v1/tools/{tool_id}/")
        client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=300)
    parser.add_argument("--targets", default="runserver,prod")
    args = parser.parse_args()
    print(f"load average at start: {' '.join(open('/proc/loadavg').read().split()[:3])}")
    direct_ms = asyncio.run(direct(args.n))
    print(f"direct SDK call (stdio, warm):          {summary(direct_ms)}")
    targets = {"runserver": runserver, "prod": production}
    for name in args.targets.split(","):
        with targets[name]() as (base, token, tenant):
            got = measure(base, token, tenant, args.n, keep_alive=name != "runserver")
        d50 = pct(direct_ms, 50)
        print(f"[{name}] invoke via API:               {summary(got['invoke'])}")
        print(f"[{name}] GET /tools/{{id}}/:              {summary(got['detail'])}")
        print(f"[{name}] bare view /healthz:            {summary(got['bare'])}")
        i50, g50, b50 = pct(got["invoke"], 50), pct(got["detail"], 50), pct(got["bare"], 50)
        print(json.dumps({
            "target": name,
            "invoke_minus_direct_p50_ms": round(i50 - d50, 2), "goal_invoke_minus_direct_ms": 5,
            "invoke_over_direct_p50": round(i50 / d50, 2),
            "detail_over_bare_p50": round(g50 / b50, 2), "goal_detail_over_bare": 2,
        }))
        sys.stdout.flush()
    print(f"load average at end: {' '.join(open('/proc/loadavg').read().split()[:3])}")


if __name__ == "__main__":
    main()
