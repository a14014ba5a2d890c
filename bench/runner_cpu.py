"""CPU per warm call of the runner hop, both sides: the web side (RunnerPool.call in the calling thread) and the
runner's own threads (uvicorn's loop and the session pool's loop), the sandboxed inventory server left out.

    .venv/bin/python bench/runner_cpu.py [--calls 2000] [--rounds 3] [--profile runner|client]

The runner app (`build_app` over a SessionPool) is served by uvicorn in a thread of this process, as
`manage.py toolhub_runner` serves it, and the web side reaches it through RunnerPool's keep-alive transport with a
fixed one-runner registry (no Redis). The spec is sandboxed as the settings build it (bwrap), so it carries the
policy's paths as in production. Per-thread CPU is read from /proc/self/task/<tid>/stat. Compare runs side by side
only (run it from two checkouts alternately): the machine's speed varies.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.dev")

SECRET = "bench-runner-secret"
SERVER = ROOT / "toolhub_demo" / "inventory_server.py"


class _OneRunner:
    """The registry's surface RunnerPool reads, answering one fixed runner."""

    def __init__(self, url: str) -> None:
        from tools_app.runtime.runner.placement import RunnerInfo

        self.info = RunnerInfo(id="bench", url=url, servers=0, since=time.time(), draining=False)
        self.rejected = 0

    def runners(self, max_age_s: float | None = None) -> list[Any]:
        return [self.info]

    def forget(self) -> None:
        pass

    def describe(self) -> list[Any]:
        return []


def _spec() -> Any:
    import tempfile

    from tools_app.runtime.mcp.spec import LocalSpec, ServerSpec
    from tools_app.runtime.sandbox import SandboxPolicy, ServerSandbox

    ro = tuple(dict.fromkeys((sys.prefix, os.path.realpath(sys.prefix), sys.base_prefix, str(ROOT))))
    box = ServerSandbox(policy=SandboxPolicy(extra_ro_paths=ro, tmp_bytes=256 << 20), tenant_key="1",
                        workspace=tempfile.mkdtemp(prefix="runner-cpu-"), uid=os.getuid())
    target = LocalSpec(command=sys.executable, args=(str(SERVER),), env=(("BENCH_MARKER", "runner-cpu"),),
                       startup_timeout_s=30, sandbox=box)
    return ServerSpec(tool_id=1, config_version=1, tenant_key="1", target=target)


def _thread_cpu(tids: list[int]) -> float:
    total = 0
    for tid in tids:
        try:
            fields = Path(f"/proc/self/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--profile", choices=("runner", "client"), default="")
    parser.add_argument("--unsandboxed", action="store_true", help="no bwrap (the machine cannot run it)")
    parser.add_argument("--own-loop", action="store_true",
                        help="the runner's session pool on a loop thread of its own, not on the serving loop")
    parser.add_argument("--ab", nargs="+", metavar="CHECKOUT",
                        help="two checkouts' runners (`manage.py toolhub_runner`, REDIS_URL for their registry), "
                             "called alternately in batches of --calls: each runner process's CPU per call")
    args = parser.parse_args()
    if args.ab:
        _ab(args)
        return

    import django

    django.setup()
    import uvicorn

    from core.outbound import OutboundPolicy
    from tools_app.runtime.mcp import SessionPool
    from tools_app.runtime.runner.app import build_app
    from tools_app.runtime.runner.client import RunnerPool

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    runner_pool = SessionPool(policy=OutboundPolicy.build(""))
    app = build_app(runner_pool, SECRET, allow_unsandboxed=True)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off"))
    profiler = cProfile.Profile(time.thread_time)
    server_tid: list[int] = []

    def serve() -> None:
        server_tid.append(threading.get_native_id())
        import asyncio

        factory = server.config.get_loop_factory()  # uvicorn's own choice (uvloop when installed), as run() makes
        loop = factory() if factory is not None else asyncio.new_event_loop()
        _LOOP.append(loop)
        if not args.own_loop:
            loop.run_until_complete(runner_pool.adopt())  # as manage.py toolhub_runner does
        loop.run_until_complete(server.serve())

    threading.Thread(target=serve, name="bench-runner", daemon=True).start()
    while not server.started:
        time.sleep(0.05)
    web = RunnerPool(SessionPool(policy=OutboundPolicy.build("")), _OneRunner(f"http://127.0.0.1:{port}"), SECRET)  # type: ignore[arg-type]
    spec = _spec()
    if args.unsandboxed:
        from dataclasses import replace

        spec = replace(spec, target=replace(spec.target, sandbox=None))

    def call() -> None:
        result = web.call(spec, "get_inventory", {"sku": "DEMO-001"})
        assert result.success, result

    for _ in range(50):
        call()
    pool_tids = [t.native_id for t in threading.enumerate() if t.native_id not in (*server_tid, threading.get_native_id())]
    runner_tids = server_tid + [t for t in pool_tids if t is not None]
    print(f"load {os.getloadavg()[0]:.2f}; runner threads {len(runner_tids)}; spec {'sandboxed' if not args.unsandboxed else 'unsandboxed'}")
    for round_no in range(args.rounds):
        runner0, client0, wall0 = _thread_cpu(runner_tids), time.thread_time(), time.perf_counter()
        for _ in range(args.calls):
            call()
        runner_us = (_thread_cpu(runner_tids) - runner0) / args.calls * 1e6
        client_us = (time.thread_time() - client0) / args.calls * 1e6
        wall_us = (time.perf_counter() - wall0) / args.calls * 1e6
        print(f"round {round_no + 1}: runner threads {runner_us:.0f} us/call, web side (calling thread) "
              f"{client_us:.0f} us/call, wall {wall_us:.0f} us/call, load {os.getloadavg()[0]:.2f}", flush=True)
    if args.profile == "client":
        profiler.enable()
        for _ in range(args.calls):
            call()
        profiler.disable()
        profiler.dump_stats("/tmp/runner_cpu_client.prof")
    elif args.profile == "runner":
        import asyncio

        loop_profiler = cProfile.Profile(time.thread_time)
        asyncio.run_coroutine_threadsafe(_call(profiler.enable), _LOOP[0]).result()
        pool_loop = runner_pool._loop
        assert pool_loop is not None
        pool_loop.call_soon_threadsafe(loop_profiler.enable)
        for _ in range(args.calls):
            call()
        asyncio.run_coroutine_threadsafe(_call(profiler.disable), _LOOP[0]).result()
        done = threading.Event()

        def stop() -> None:
            loop_profiler.disable()
            done.set()

        pool_loop.call_soon_threadsafe(stop)
        done.wait()
        profiler.dump_stats("/tmp/runner_cpu_server.prof")
        loop_profiler.dump_stats("/tmp/runner_cpu_pool.prof")
    web.shutdown()
    _stop_runner(server, runner_pool)


def _stop_runner(server: Any, runner_pool: Any) -> None:
    """As the runner stops: its servers closed on the loop they run on (release), then the serving loop ends."""
    import asyncio

    asyncio.run_coroutine_threadsafe(runner_pool.release(), _LOOP[0]).result(30)  # no-op with --own-loop
    server.should_exit = True
    runner_pool.shutdown()


def _process_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _ab(args: Any) -> None:
    """Both checkouts' runners started side by side and called in alternating batches, so the machine's changing
    speed falls on both alike; the web side is this checkout's RunnerPool for both."""
    import signal
    import subprocess

    import django

    django.setup()
    from core.outbound import OutboundPolicy
    from tools_app.runtime.mcp import SessionPool
    from tools_app.runtime.runner.client import RunnerPool

    redis_url = os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/4"
    procs, pools = [], []
    spec = _spec()
    try:
        for n, checkout in enumerate(args.ab):
            with socket.socket() as sock:
                sock.bind(("127.0.0.1", 0))
                port = sock.getsockname()[1]
            env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.dev", "TOOLHUB_RUNNERS": "redis",
                   "REDIS_URL": redis_url, "TOOLHUB_RUNNER_SECRET": SECRET}
            procs.append(subprocess.Popen([sys.executable, "manage.py", "toolhub_runner", "--port", str(port),
                                           "--id", f"ab-{n}"], cwd=checkout, env=env, start_new_session=True))
            pools.append(RunnerPool(SessionPool(policy=OutboundPolicy.build("")),
                                    _OneRunner(f"http://127.0.0.1:{port}"), SECRET))  # type: ignore[arg-type]
        for pool in pools:
            deadline = time.monotonic() + 60
            while True:
                try:
                    if pool.call(spec, "get_inventory", {"sku": "DEMO-001"}).success:
                        break
                except Exception:  # noqa: BLE001 - not listening yet
                    pass
                if time.monotonic() > deadline:
                    raise SystemExit("a runner did not answer")
                time.sleep(0.3)
            for _ in range(50):
                assert pool.call(spec, "get_inventory", {"sku": "DEMO-001"}).success
        spent = [[0.0, 0] for _ in pools]
        for round_no in range(args.rounds):
            for n, pool in enumerate(pools):
                before = _process_cpu(procs[n].pid)
                for _ in range(args.calls):
                    assert pool.call(spec, "get_inventory", {"sku": "DEMO-001"}).success
                used = _process_cpu(procs[n].pid) - before
                spent[n][0] += used
                spent[n][1] += args.calls
                print(f"round {round_no + 1} {args.ab[n]}: runner process {used / args.calls * 1e6:.0f} us/call, "
                      f"load {os.getloadavg()[0]:.2f}", flush=True)
        for n, checkout in enumerate(args.ab):
            print(f"{checkout}: runner process {spent[n][0] / spent[n][1] * 1e6:.0f} us/call over {spent[n][1]} calls")
    finally:
        for pool in pools:
            pool.shutdown()
        for proc in procs:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(30)


async def _call(fn: Any) -> None:
    fn()


_LOOP: list[Any] = []


if __name__ == "__main__":
    main()
