"""A warm REMOTE tools/call to a 2026-07-28 upstream through SessionPool.call: the raw path (rawpost.py, the calling
thread's own POST) against the pool's loop (post.OnePost), A/B alternating in one process.

    .venv/bin/python bench/raw_post.py [-n 300] [--rounds 4]

Two SessionPools (raw_post on and off) call the inventory server (streamable HTTP on loopback, which negotiates
2026-07-28) in alternating blocks of `-n` calls. Per call: this process's CPU time (every thread: the caller and the
pool's loop; what a loaded machine cannot inflate much) and the wall time (which it can). `--profile` prints a
cProfile of the raw path's calling thread (its blocking reads show as wall time in recv).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import statistics
import time

from _common import ROOT, pct  # noqa: F401 - ROOT: puts the repository on sys.path
from gateway import ARGS, http_upstream

from core.outbound import OutboundPolicy
from tools_app.configs import server_spec
from tools_app.runtime.mcp.pool import SessionPool

LOOPBACK = OutboundPolicy.build("127.0.0.0/8,::1")


def block(pool: SessionPool, spec: object, n: int) -> tuple[float, list[float]]:
    walls = []
    cpu = time.process_time()
    for _ in range(n):
        started = time.perf_counter()
        result = pool.call(spec, "get_inventory", ARGS)  # type: ignore[arg-type]
        walls.append((time.perf_counter() - started) * 1000)
        assert result.success, result
    return (time.process_time() - cpu) * 1000 / n, walls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    print(f"load average at start: {' '.join(open('/proc/loadavg').read().split()[:3])} ({os.cpu_count()} CPUs, shared)")
    with http_upstream() as url:
        spec = server_spec(tool_id=1, config_version=1, tenant_key="bench", tool_type="REMOTE",
                           config={"url": url, "transport": "streamable_http", "timeout_s": 30})
        pools = {"loop": SessionPool(policy=LOOPBACK, raw_post=False), "raw": SessionPool(policy=LOOPBACK)}
        try:
            for pool in pools.values():
                block(pool, spec, 30)  # warm
            # The first call opens the session on the loop; every later one is raw (or none, with the setting off).
            assert pools["raw"].stats()["raw_calls"] == 29 and pools["loop"].stats()["raw_calls"] == 0
            cpu: dict[str, list[float]] = {name: [] for name in pools}
            wall: dict[str, list[float]] = {name: [] for name in pools}
            for i in range(args.rounds):
                for name in (list(pools) if i % 2 == 0 else list(reversed(pools))):
                    per_call, walls = block(pools[name], spec, args.n)
                    cpu[name].append(per_call)
                    wall[name].extend(walls)
            for name in pools:
                print(f"  {name:>4}: process CPU {statistics.median(cpu[name]):.3f} ms/call (blocks: "
                      f"{', '.join(f'{c:.2f}' for c in cpu[name])}); wall p50 {pct(wall[name], 50):.2f} ms")
            print(f"  raw / loop CPU: {statistics.median(cpu['raw']) / statistics.median(cpu['loop']):.2f}x; wall p50 "
                  f"{pct(wall['raw'], 50) - pct(wall['loop'], 50):+.2f} ms")
            if args.profile:
                profile = cProfile.Profile()
                profile.enable()
                block(pools["raw"], spec, args.n)
                profile.disable()
                pstats.Stats(profile).sort_stats("tottime").print_stats(20)
        finally:
            for pool in pools.values():
                pool.shutdown()
    print(f"load average at end: {' '.join(open('/proc/loadavg').read().split()[:3])}")


if __name__ == "__main__":
    main()
