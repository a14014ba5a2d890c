"""What the API adds on top of the tool: warm invoke through POST /tools/{id}/invoke/ vs a direct warm SDK call,
and GET /tools/{id}/ vs a bare Django view (/healthz), on the dev server and on the production server.

    .venv/bin/python bench/api_overhead.py [-n 300] [--targets runserver,prod]

`prod` needs PostgreSQL and Redis (it runs deploy/prod_local.py). Goals: invoke p50 within 5 ms of
the direct SDK call; GET /tools/{id}/ p50 within 2x the bare view. The bare view, /healthz (core.health), reads no
database, cache or session and needs no auth; it passes through the same middleware as every other view, so the
ratio is what authentication, tenancy, the tool read and its rendering add. Each pair (direct call and invoke,
detail and bare view) is sampled in turns, one call of each per round, so load from other work on the machine
hits both sides alike; the direct call is timed inside its own event loop.

Both servers are measured on one kept-alive connection, as browsers and API clients use them. The dev server is
Toolhub's `runserver` (core/management/commands/runserver.py: Django's, with TCP_NODELAY on each connection;
without it the body of every answer on a kept-alive connection could wait up to 40 ms for the client's delayed
ACK, which is why this script once sent `Connection: close` there, paying a new thread and a new SQLite
connection per request). The production server (uvicorn) sets TCP_NODELAY itself.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import httpx2
from _common import ROOT, free_port, pct, prod_topology, scratch_toolhub, summary
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

SERVER = ROOT / "toolhub_demo" / "inventory_server.py"
ARGS = {"sku": "DEMO-001"}




class Direct:
    """A warm direct SDK session (stdio) on its own event loop thread; `call()` times one tools/call inside that
    loop, so the hand-off from the caller's thread is not counted."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._ready: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._stop = asyncio.Event()
        self._session: ClientSession | None = None
        self._serving = asyncio.run_coroutine_threadsafe(self._serve(), self._loop)
        self._ready.result(60)

    async def _serve(self) -> None:
        params = StdioServerParameters(command=sys.executable, args=[str(SERVER)])
        try:
            async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                for _ in range(20):
                    await session.call_tool("get_inventory", ARGS)
                self._session = session
                self._ready.set_result(None)
                await self._stop.wait()
        except BaseException as exc:
            if not self._ready.done():
                self._ready.set_exception(exc)
            raise

    async def _timed(self) -> float:
        assert self._session is not None
        t = time.perf_counter()
        result = await self._session.call_tool("get_inventory", ARGS)
        elapsed = (time.perf_counter() - t) * 1000
        assert not result.is_error
        return elapsed

    def call(self) -> float:
        return asyncio.run_coroutine_threadsafe(self._timed(), self._loop).result(60)

    def close(self) -> None:
        self._loop.call_soon_threadsafe(self._stop.set)
        self._serving.result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


def in_turns(n: int, fns: dict[str, Callable[[], float | None]]) -> dict[str, list[float]]:
    """n samples of each, taken in turns (one of each per round, the order rotating), so all see the same load.
    A function returns its own duration in ms, or None to be timed here."""
    names = list(fns)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for round_ in range(n + 20):
        for name in names[round_ % len(names):] + names[:round_ % len(names)]:
            t = time.perf_counter()
            own = fns[name]()
            elapsed = own if own is not None else (time.perf_counter() - t) * 1000
            if round_ >= 20:  # warm-up rounds are not kept
                samples[name].append(elapsed)
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


def measure(base: str, token: str, tenant: str, n: int, direct: Direct) -> dict[str, list[float]]:
    headers = {"Authorization": f"Token {token}", "X-Tenant": tenant}
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
        # Each comparison in turns: the machine is shared, and load that comes and goes must hit both sides.
        return {**in_turns(n, {"direct": direct.call, "invoke": invoke}),
                **in_turns(n, {"detail": detail, "bare": bare})}
    finally:
        client.delete(f"/api/v1/tools/{tool_id}/")
        client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=300)
    parser.add_argument("--targets", default="runserver,prod")
    args = parser.parse_args()
    print(f"load average at start: {' '.join(open('/proc/loadavg').read().split()[:3])}")
    direct = Direct()
    targets = {"runserver": runserver, "prod": production}
    try:
        for name in args.targets.split(","):
            with targets[name]() as (base, token, tenant):
                got = measure(base, token, tenant, args.n, direct)
            print(f"[{name}] direct SDK call (stdio, warm):  {summary(got['direct'])}")
            print(f"[{name}] invoke via API:               {summary(got['invoke'])}")
            print(f"[{name}] GET /tools/{{id}}/:              {summary(got['detail'])}")
            print(f"[{name}] bare view /healthz:            {summary(got['bare'])}")
            d50 = pct(got["direct"], 50)
            i50, g50, b50 = pct(got["invoke"], 50), pct(got["detail"], 50), pct(got["bare"], 50)
            print(json.dumps({
                "target": name,
                "invoke_minus_direct_p50_ms": round(i50 - d50, 2), "goal_invoke_minus_direct_ms": 5,
                "invoke_over_direct_p50": round(i50 / d50, 2),
                "detail_over_bare_p50": round(g50 / b50, 2), "goal_detail_over_bare": 2,
            }))
            sys.stdout.flush()
    finally:
        direct.close()
    print(f"load average at end: {' '.join(open('/proc/loadavg').read().split()[:3])}")


if __name__ == "__main__":
    main()
