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

After the timed samples, a counting phase makes `--count` (default 200) more calls of each kind one kind at a
time and reads, from /proc, what they cost each process: CPU time (every thread's schedstat run time) and
voluntary context switches (a thread that blocked to wait for another: the thread hand-offs) per call, of the
gateway process, the upstream server and this client. These hardly move with the machine's load, so they are
what a change is checked against when the latencies cannot be trusted. The gateway's busy threads are listed too,
per call (`main`: uvicorn's loop; the others: the worker threads and the MCP session pool's loop).

`--sdk-call-path` sends the upstream's tools/call through the SDK's ClientSession instead of as one POST
(tools_app/runtime/mcp/post.py): run it alternately with a plain run for the A/B (bench/PROFILE-gateway.md).

`--ab-fastcall` adds a client of each era whose calls take the SDK's server path (the gateway's tools/call fast path,
agents_app/gateway/fastcall.py, turned off for its requests: bench/_fastcall_ab.py), sampled in the same turns
against the same gateway process: `2025sdk`, `2026sdk`. `--sdk-server-path` turns the fast path off for a whole run.

`--ab-rawpost` adds a client of each era whose upstream call goes through the MCP session pool's loop instead of the
raw path (tools_app/runtime/mcp/rawpost.py, the worker thread's own POST: TOOLHUB_MCP_RAW_POST), sampled in the same
turns against the same gateway process (bench/_rawpost_ab.py): `2025loop`, `2026loop`.

`--log-upstream FILE` runs the upstream with every request it receives logged to FILE
(bench/_inventory_server_logged.py) and prints, per kind in the counting phase, the requests the upstream received per
call by JSON-RPC method and HTTP method (what else than the call the gateway sends it: listing refreshes, probes).

`--ab-one-worker` adds a client of each era whose worker-thread jobs run on one dedicated thread instead of the loop's
default executor (bench/_one_worker_ab.py), in the same turns: `2025one`, `2026one`. `--gc-probe` counts the
gateway's garbage collections per call, then again after gc.freeze() (bench/_gc_probe.py). `--cpu-split` prints the
warm call's parts (worker job, invoke checks, raw POST, screen, audit row, the loop's answer) in thread CPU per call
(bench/_cpu_split.py).

`--ab-lean` adds a client of each era without branch h-gwlean's cuts of the warm call (bench/_lean_ab.py puts the
code before them back for its requests), in the same turns against the same gateway process: `2025old`, `2026old`.

`--pool-on-server-loop` is an experiment: the MCP session pool runs on uvicorn's loop instead of its own thread
(bench/_pool_on_server_loop.py), to count what a warm call's third thread costs (bench/PROFILE-gateway.md).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import gateway as bench_gateway
import httpx2
from _common import free_port, pct, summary
from gateway import ARGS, http_upstream, setup_agent
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client

WARMUP = 30
COUNT = 200
PROFILED_APP = "bench._profiled_asgi:application"
POOL_ON_SERVER_LOOP_APP = "bench._pool_on_server_loop:application"
SDK_CALL_PATH_APP = "bench._sdk_call_path:application"
FASTCALL_AB_APP = "bench._fastcall_ab:application"
RAWPOST_AB_APP = "bench._rawpost_ab:application"
ONE_WORKER_AB_APP = "bench._one_worker_ab:application"
GC_PROBE_APP = "bench._gc_probe:application"
LEAN_AB_APP = "bench._lean_ab:application"
LEAN_OFF_HEADER = "x-bench-lean-off"  # bench/_lean_ab.py: this request runs without branch h-gwlean's cuts
CPU_SPLIT_APP = "bench._cpu_split:application"
ONE_WORKER_HEADER = "x-bench-one-worker"  # bench/_one_worker_ab.py: this request's jobs run on one dedicated thread
LOOP_CALL_PATH_HEADER = "x-bench-loop-call-path"  # bench/_rawpost_ab.py: this request's upstream call takes the loop
SDK_SERVER_PATH_HEADER = "x-bench-sdk-server-path"  # bench/_fastcall_ab.py: this request takes the SDK's server path


@contextmanager
def toolhub(profile: str | None, pool_on_server_loop: bool = False, sdk_call_path: bool = False,
            sdk_server_path: bool = False, ab_fastcall: bool = False, ab_rawpost: bool = False,
            ab_one_worker: bool = False, gc_probe: bool = False, cpu_split: bool = False, ab_lean: bool = False
            ) -> Iterator[tuple[str, str]]:
    """uvicorn serving Toolhub (profiled when asked); yields (base URL, an owner's API token)."""
    app = (PROFILED_APP if profile else POOL_ON_SERVER_LOOP_APP if pool_on_server_loop
           else SDK_CALL_PATH_APP if sdk_call_path else FASTCALL_AB_APP if ab_fastcall
           else RAWPOST_AB_APP if ab_rawpost else ONE_WORKER_AB_APP if ab_one_worker
           else GC_PROBE_APP if gc_probe else CPU_SPLIT_APP if cpu_split else LEAN_AB_APP if ab_lean
           else "config.asgi:application")
    env = {"BENCH_PROFILE_PREFIX": str(Path(profile).resolve())} if profile else {}
    if sdk_server_path:
        env["TOOLHUB_MCP_FASTCALL"] = "0"
    with bench_gateway.toolhub(app=app, name="bench-gateway-eras", env_extra=env, quiet=False) as served:
        yield served


@asynccontextmanager
async def connected(url: str, token: str | None, mode: str, sdk_server_path: bool = False,
                    loop_call_path: bool = False, one_worker: bool = False, lean_off: bool = False
                    ) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    if lean_off:
        headers[LEAN_OFF_HEADER] = "1"
    if one_worker:
        headers[ONE_WORKER_HEADER] = "1"
    if sdk_server_path:
        headers[SDK_SERVER_PATH_HEADER] = "1"
    if loop_call_path:
        headers[LOOP_CALL_PATH_HEADER] = "1"
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(60, read=300)) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:
            yield client


async def _lean_totals() -> dict[str, list[float]]:
    """{"on"|"off": [ms of each job]} so far (bench/_lean_ab.py)."""
    async with httpx2.AsyncClient(timeout=60) as http:
        answer = await http.get(f"{LEAN_AB_BASE}/__bench_lean__")
        answer.raise_for_status()
        return dict(answer.json())


async def _profiling(base: str, token: str, label: str | None) -> None:
    """Start (label) or stop and write (None) the gateway process's profile (bench/_profiled_asgi.py)."""
    async with httpx2.AsyncClient(timeout=60) as http:
        resp = await http.post(f"{base}/__bench_profile__", json={"label": label},
                               headers={"Authorization": f"Bearer {token}"})
        resp.raise_for_status()


def _pid_serving(port: str, marker: str) -> int | None:
    """The process whose command line names `marker` and `port` (uvicorn or the upstream server)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        words = [a.decode(errors="replace") for a in argv]
        if any(marker in w for w in words) and port in words:
            return int(entry)
    return None


def _threads_usage(pid: int | None) -> dict[int, tuple[float, int]]:
    """Per thread of `pid`: (CPU ms, voluntary context switches) so far."""
    if pid is None:
        return {}
    out: dict[int, tuple[float, int]] = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            cpu_ns = int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[0])
            switches = 0
            for line in Path(f"/proc/{pid}/task/{tid}/status").read_text().splitlines():
                if line.startswith("voluntary_ctxt_switches:"):
                    switches = int(line.split()[1])
            out[int(tid)] = (cpu_ns / 1e6, switches)
        except OSError:
            continue  # a thread that ended meanwhile
    return out


def _proc_usage(pid: int | None) -> tuple[float, int]:
    """(CPU ms, voluntary context switches) of every thread of `pid` so far."""
    threads = _threads_usage(pid).values()
    return sum(cpu for cpu, _ in threads), sum(switches for _, switches in threads)


def _busy_threads(pid: int | None, before: dict[int, tuple[float, int]], after: dict[int, tuple[float, int]],
                  count: int) -> str:
    """The threads that worked during the calls, per call: `main` is the event loop's (uvicorn's) thread; the others
    are the worker threads the database work hops to and the MCP session pool's loop (by elimination)."""
    cells = []
    for tid, (cpu, switches) in after.items():
        cpu0, switches0 = before.get(tid, (0.0, 0))
        if switches - switches0 >= count // 10 or cpu - cpu0 >= 0.05 * count:
            name = "main" if tid == pid else f"{tid}{':' + THREAD_NAMES[tid] if tid in THREAD_NAMES else ''}"
            cells.append((cpu - cpu0, f"{name} {(cpu - cpu0) / count:.3f} ms/{(switches - switches0) / count:.2f} sw"))
    return ", ".join(cell for _, cell in sorted(cells, reverse=True))


async def _clients(stack: AsyncExitStack, upstream: str, gateway: str, name: str, token: str, ab_fastcall: bool,
                   ab_rawpost: bool = False, ab_one_worker: bool = False, ab_lean: bool = False
                   ) -> dict[str, tuple[Client, str]]:
    clients = {
        "direct": (await stack.enter_async_context(connected(upstream, None, "auto")), "get_inventory"),
        "2025": (await stack.enter_async_context(connected(gateway, token, "legacy")), name),
        "2026": (await stack.enter_async_context(connected(gateway, token, "2026-07-28")), name),
    }
    if ab_fastcall:  # the same eras through the SDK's server path, in the same turns (bench/_fastcall_ab.py)
        clients["2025sdk"] = (await stack.enter_async_context(connected(gateway, token, "legacy", True)), name)
        clients["2026sdk"] = (await stack.enter_async_context(connected(gateway, token, "2026-07-28", True)), name)
    if ab_rawpost:  # the same eras with the upstream call on the pool's loop, in the same turns (bench/_rawpost_ab.py)
        clients["2025loop"] = (await stack.enter_async_context(
            connected(gateway, token, "legacy", loop_call_path=True)), name)
        clients["2026loop"] = (await stack.enter_async_context(
            connected(gateway, token, "2026-07-28", loop_call_path=True)), name)
    if ab_one_worker:  # the same eras with their jobs on one dedicated thread, in the same turns (_one_worker_ab.py)
        clients["2025one"] = (await stack.enter_async_context(connected(gateway, token, "legacy", one_worker=True)),
                              name)
        clients["2026one"] = (await stack.enter_async_context(
            connected(gateway, token, "2026-07-28", one_worker=True)), name)
    if ab_lean:  # the same eras without branch h-gwlean's cuts, in the same turns (bench/_lean_ab.py)
        clients["2025old"] = (await stack.enter_async_context(connected(gateway, token, "legacy", lean_off=True)),
                              name)
        clients["2026old"] = (await stack.enter_async_context(
            connected(gateway, token, "2026-07-28", lean_off=True)), name)
    return clients


def _upstream_log_lines() -> list[dict[str, Any]]:
    if not UPSTREAM_LOG:
        return []
    return [json.loads(line) for line in Path(UPSTREAM_LOG).read_text().splitlines() if line.strip()]


def _upstream_requests(lines: list[dict[str, Any]], count: int) -> str:
    """The upstream's received requests per call, by (HTTP method, JSON-RPC methods, session/protocol headers)."""
    kinds: dict[str, int] = {}
    for line in lines:
        h = line["headers"]
        key = (f"{line['http']} {'+'.join(line['rpc']) or '-'} [{line['status']}]"
               f"{' sid' if 'mcp-session-id' in h else ''} pv={h.get('mcp-protocol-version', '-')}")
        kinds[key] = kinds.get(key, 0) + 1
    return ", ".join(f"{key}: {n / count:.3f}" for key, n in sorted(kinds.items(), key=lambda kv: -kv[1]))


async def _gc_totals() -> dict[str, Any] | None:
    """The gateway's garbage-collector totals (bench/_gc_probe.py), when --gc-probe runs it."""
    if GC_PROBE_BASE is None:
        return None
    async with httpx2.AsyncClient(timeout=60) as http:
        return dict((await http.get(f"{GC_PROBE_BASE}/__bench_gc__")).json())


async def _cpu_split() -> dict[str, list[float]] | None:
    """The gateway's per-part thread CPU totals (bench/_cpu_split.py), when --cpu-split runs it."""
    if CPU_SPLIT_BASE is None:
        return None
    async with httpx2.AsyncClient(timeout=60) as http:
        return dict((await http.get(f"{CPU_SPLIT_BASE}/__bench_cpu__")).json())


def _print_split(before: dict[str, list[float]], after: dict[str, list[float]], count: int) -> None:
    for part, (calls, ms) in after.items():
        calls0, ms0 = before.get(part, [0, 0.0])
        if calls > calls0:
            print(f"          {part:<34} {(ms - ms0) / count:.3f} ms/call ({(calls - calls0) / count:.2f} runs/call)")


async def _count(label: str, once: Any, pids: dict[str, int | None], count: int) -> None:
    """`count` calls of one kind alone: what they cost each process (and the gateway's busy threads), per call."""
    split_before = await _cpu_split()
    gc_before = await _gc_totals()
    logged_before = len(_upstream_log_lines())
    threads_before = _threads_usage(pids["gateway"])
    before = {who: _proc_usage(pid) for who, pid in pids.items()}
    for _ in range(count):
        await once(label)
    after = {who: _proc_usage(pid) for who, pid in pids.items()}
    threads_after = _threads_usage(pids["gateway"])
    cells = []
    for who in pids:
        cpu = (after[who][0] - before[who][0]) / count
        switches = (after[who][1] - before[who][1]) / count
        COUNTS[f"{label}_{who}_cpu_ms"] = round(cpu, 3)
        COUNTS[f"{label}_{who}_switches"] = round(switches, 2)
        cells.append(f"{who} {cpu:.3f} ms CPU, {switches:.2f} switches")
    print(f"  {label:>6}: " + "; ".join(cells))
    if label != "direct":
        print(f"          gateway threads: {_busy_threads(pids['gateway'], threads_before, threads_after, count)}")
    if UPSTREAM_LOG:
        print(f"          upstream received per call: {_upstream_requests(_upstream_log_lines()[logged_before:], count)}")
    split_after = await _cpu_split()
    if split_before is not None and split_after is not None:
        _print_split(split_before, split_after, count)
    gc_after = await _gc_totals()
    if gc_before is not None and gc_after is not None:
        cells = []
        for gen in ("0", "1", "2"):
            runs = gc_after["totals"][gen][0] - gc_before["totals"][gen][0]
            took = gc_after["totals"][gen][1] - gc_before["totals"][gen][1]
            cells.append(f"gen{gen} {runs / count:.3f} runs {took / count:.3f} ms")
        print(f"          gateway GC per call: {', '.join(cells)} (frozen objects {gc_after['frozen']})")


async def _count_frozen(labels: list[str], once: Any, pids: dict[str, int | None], count: int) -> None:
    """The counting phase again after gc.freeze() in the gateway: what the startup heap costs its collections."""
    async with httpx2.AsyncClient(timeout=60) as http:
        (await http.post(f"{GC_PROBE_BASE}/__bench_gc__", json={"freeze": True})).raise_for_status()
    print("after gc.freeze() in the gateway:")
    for label in labels:
        await _count(label, once, pids, count)


async def _turns(order: list[str], once: Any, n: int) -> dict[str, list[float]]:
    """`n` calls of each kind, the order rotating each turn; with --ab-lean, the worker job's CPU per mode."""
    samples: dict[str, list[float]] = {label: [] for label in order}
    lean_before = await _lean_totals() if LEAN_AB_BASE is not None else {}
    shuffled = random.Random(36)
    for i in range(n):
        turn = order[i % len(order):] + order[:i % len(order)]
        if LEAN_AB_BASE is not None:
            # A rotation keeps each kind after the same one (2025 after direct: the gateway idle, its caches cold);
            # shuffled turns put every kind after every other alike.
            shuffled.shuffle(turn)
        for label in turn:
            samples[label].append(await once(label))
    if LEAN_AB_BASE is not None:
        lean_after = await _lean_totals()
        print("worker job (fastcall._job) thread CPU per call in the timed turns, kinds interleaved call by call:")
        for mode in ("on", "off"):
            took = lean_after[mode][len(lean_before.get(mode, [])):]
            mean, median = sum(took) / len(took), pct(took, 50)
            COUNTS.update({f"lean_{mode}_job_cpu_ms": round(mean, 3), f"lean_{mode}_job_cpu_p50_ms": round(median, 3)})
            print(f"  cuts {mode:<3}: mean {mean:.3f} ms, median {median:.3f} ms over {len(took)} jobs")
    return samples


async def run(upstream: str, gateway: str, name: str, token: str, n: int, base: str, profile: bool,
              count: int = COUNT, ab_fastcall: bool = False, ab_rawpost: bool = False, ab_one_worker: bool = False,
              ab_lean: bool = False) -> dict[str, list[float]]:
    async with AsyncExitStack() as stack:
        clients = await _clients(stack, upstream, gateway, name, token, ab_fastcall, ab_rawpost, ab_one_worker,
                                 ab_lean)
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
        samples = await _turns(list(clients), once, n)
        if ab_one_worker:  # the gateway's Python thread names, for the busy-thread lines
            async with httpx2.AsyncClient(timeout=60) as http:
                named = (await http.get(f"{base}/__bench_threads__")).json()
            THREAD_NAMES.update({int(tid): str(name) for tid, name in named.items()})
        if count:
            pids = {"gateway": _pid_serving(base.rsplit(":", 1)[1], "uvicorn"),
                    "upstream": _pid_serving(upstream.rsplit(":", 1)[1].split("/")[0], "inventory_server"),
                    "client": os.getpid()}
            print(f"per call, over {count} calls of each kind made one kind at a time (/proc: CPU ms of every "
                  "thread, voluntary context switches):")
            # The A/B counts its kinds twice, in one order then the other, so a VM drifting within the run does not
            # favour the kinds counted first.
            ab = ab_fastcall or ab_rawpost or ab_one_worker or ab_lean
            for counting in ([list(clients), list(reversed(clients))] if ab else [list(clients)]):
                for label in counting:
                    await _count(label, once, pids, count)
            if GC_PROBE_BASE is not None:
                await _count_frozen(list(clients), once, pids, count)
        if profile:
            for era in ("2025", "2026"):
                await _profiling(base, token, era)
                for _ in range(n):
                    await once(era)
                await _profiling(base, token, None)
        return samples


COUNTS: dict[str, float] = {}
LEAN_AB_BASE: str | None = None  # --ab-lean: the gateway's base URL (bench/_lean_ab.py answers there)
CPU_SPLIT_BASE: str | None = None  # --cpu-split: the gateway's base URL (bench/_cpu_split.py answers there)
GC_PROBE_BASE: str | None = None  # --gc-probe: the gateway's base URL (bench/_gc_probe.py answers there)
THREAD_NAMES: dict[int, str] = {}  # the gateway's threads' Python names (--ab-one-worker asks the gateway for them)
UPSTREAM_LOG: str | None = None  # --log-upstream: the file bench/_inventory_server_logged.py writes


@contextmanager
def logged_upstream(path: str) -> Iterator[str]:
    """The inventory server on streamable HTTP with every received request logged to `path`; yields its /mcp URL."""
    Path(path).write_text("")
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(Path(__file__).parent / "_inventory_server_logged.py"),
                             "--port", str(port)], env={**os.environ, "BENCH_UPSTREAM_LOG": path},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        bench_gateway._wait_up(f"http://127.0.0.1:{port}/mcp", proc)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=300)
    parser.add_argument("--profile", metavar="PREFIX", help="keep a cProfile of the gateway process per era")
    parser.add_argument("--count", type=int, default=COUNT, help="calls of each kind in the counting phase (0: none)")
    parser.add_argument("--pool-on-server-loop", action="store_true",
                        help="experiment: the MCP session pool runs on uvicorn's loop (bench/_pool_on_server_loop.py)")
    parser.add_argument("--sdk-call-path", action="store_true",
                        help="A/B: a 2026 upstream's tools/call through the SDK's ClientSession, not as one POST "
                             "(bench/_sdk_call_path.py)")
    parser.add_argument("--sdk-server-path", action="store_true",
                        help="the gateway's tools/call fast path off (TOOLHUB_MCP_FASTCALL=0): every call through the "
                             "SDK's server machinery")
    parser.add_argument("--ab-fastcall", action="store_true",
                        help="A/B in one run: a client of each era through the fast path and one through the SDK's "
                             "server path (2025sdk, 2026sdk), in turns, one gateway (bench/_fastcall_ab.py)")
    parser.add_argument("--ab-rawpost", action="store_true",
                        help="A/B in one run: a client of each era whose upstream call is the worker thread's own POST "
                             "(rawpost.py) and one through the pool's loop (2025loop, 2026loop), in turns, one gateway "
                             "(bench/_rawpost_ab.py)")
    parser.add_argument("--ab-one-worker", action="store_true",
                        help="A/B in one run: a client of each era whose worker-thread jobs run on one dedicated thread "
                             "(2025one, 2026one) against the loop's default executor, in turns (bench/_one_worker_ab.py)")
    parser.add_argument("--gc-probe", action="store_true",
                        help="count the gateway's garbage collections per call (bench/_gc_probe.py), then again after "
                             "gc.freeze()")
    parser.add_argument("--cpu-split", action="store_true",
                        help="the gateway's warm call split into parts, in thread CPU per call (bench/_cpu_split.py)")
    parser.add_argument("--ab-lean", action="store_true",
                        help="A/B in one run: a client of each era without branch h-gwlean's cuts (2025old, 2026old) "
                             "against the usual ones, in turns, one gateway (bench/_lean_ab.py)")
    parser.add_argument("--log-upstream", metavar="FILE",
                        help="log every request the upstream receives to FILE; the counting phase prints them per call")
    args = parser.parse_args()
    global UPSTREAM_LOG, GC_PROBE_BASE, CPU_SPLIT_BASE, LEAN_AB_BASE
    UPSTREAM_LOG = args.log_upstream
    print(f"load average at start: {' '.join(open('/proc/loadavg').read().split()[:3])} "
          f"({os.cpu_count()} CPUs, shared)")
    if sum(map(bool, (args.profile, args.pool_on_server_loop, args.sdk_call_path, args.ab_fastcall,
                      args.ab_rawpost, args.ab_one_worker, args.gc_probe, args.cpu_split, args.ab_lean))) > 1:
        parser.error("--profile, --pool-on-server-loop, --sdk-call-path, --ab-fastcall and --ab-rawpost are separate "
                     "runs")
    with toolhub(args.profile, args.pool_on_server_loop, args.sdk_call_path, args.sdk_server_path,
                 args.ab_fastcall, args.ab_rawpost, args.ab_one_worker, args.gc_probe,
                 args.cpu_split, args.ab_lean) as (base, token), \
            (logged_upstream(args.log_upstream) if args.log_upstream else http_upstream()) as upstream:
        GC_PROBE_BASE = base if args.gc_probe else None
        CPU_SPLIT_BASE = base if args.cpu_split else None
        LEAN_AB_BASE = base if args.ab_lean else None
        gateway_url, name = setup_agent(base, token, name="inventory_http", tool_type="REMOTE",
                                        config={"url": upstream, "transport": "streamable_http"})
        samples = asyncio.run(run(upstream, gateway_url, name, token, args.n, base, bool(args.profile),
                                  args.count, args.ab_fastcall, args.ab_rawpost, args.ab_one_worker, args.ab_lean))
    direct = pct(samples["direct"], 50)
    out: dict[str, Any] = {"direct_p50_ms": round(direct, 2), "goal_minus_direct_p50_ms": 3}
    print(f"direct to the upstream (SDK Client, warm):  {summary(samples['direct'])}")
    for era in [label for label in samples if label != "direct"]:
        p50 = pct(samples[era], 50)
        print(f"through the gateway, {era} client:          {summary(samples[era])}")
        print(f"  {era} - direct p50: {p50 - direct:+.2f} ms, ratio {p50 / direct:.2f}x")
        out.update({f"gateway_{era}_p50_ms": round(p50, 2), f"gateway_{era}_p95_ms": round(pct(samples[era], 95), 2),
                    f"gateway_{era}_minus_direct_p50_ms": round(p50 - direct, 2),
                    f"gateway_{era}_over_direct_p50": round(p50 / direct, 2)})
    out.update(COUNTS)
    print(json.dumps(out))
    print(f"load average at end: {' '.join(open('/proc/loadavg').read().split()[:3])}")


if __name__ == "__main__":
    main()
