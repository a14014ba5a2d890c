"""The MCP session pool's own CPU per warm REMOTE tools/call to a 2026-07-28 upstream: one POST (post.OnePost)
against the SDK's ClientSession path, A/B alternating in one process.

    .venv/bin/python bench/one_post.py [-n 300] [--rounds 6]

Two SessionPools (one_post on and off) call the inventory server (streamable HTTP on loopback, which negotiates
2026-07-28) in turns, `-n` calls per block, `--rounds` blocks each, alternating. Per call: the CPU time of the pool's
loop thread (/proc schedstat: what a loaded machine cannot inflate) and the wall time (which it can).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

from _common import ROOT, free_port, pct  # noqa: F401 - ROOT: puts the repository on sys.path
from gateway import ARGS, http_upstream

from core.outbound import OutboundPolicy
from tools_app.configs import server_spec
from tools_app.runtime.mcp import SessionPool

LOOPBACK = OutboundPolicy.build("127.0.0.0/8,::1")


def thread_cpu_ms(native_id: int) -> float:
    return int(Path(f"/proc/self/task/{native_id}/schedstat").read_text().split()[0]) / 1e6


def block(pool: SessionPool, spec: object, n: int) -> tuple[float, list[float]]:
    """(pool loop CPU ms per call, wall ms of each call) over n calls."""
    thread = pool._thread
    assert thread is not None and thread.native_id is not None
    walls = []
    before = thread_cpu_ms(thread.native_id)
    for _ in range(n):
        started = time.perf_counter()
        result = pool.call(spec, "get_inventory", ARGS)  # type: ignore[arg-type]
        walls.append((time.perf_counter() - started) * 1000)
        assert result.success, result
    return (thread_cpu_ms(thread.native_id) - before) / n, walls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()
    print(f"load average at start: {' '.join(open('/proc/loadavg').read().split()[:3])} ({os.cpu_count()} CPUs, shared)")
    with http_upstream() as url:
        spec = server_spec(tool_id=1, config_version=1, tenant_key="bench", tool_type="REMOTE",
                           config={"url": url, "transport": "streamable_http", "timeout_s": 30})
        pools = {"sdk": SessionPool(policy=LOOPBACK, one_post=False), "one_post": SessionPool(policy=LOOPBACK)}
        try:
            for pool in pools.values():
                print(f"  negotiated {pool.probe(spec).protocol_version}")
                block(pool, spec, 30)  # warm
            cpu: dict[str, list[float]] = {name: [] for name in pools}
            wall: dict[str, list[float]] = {name: [] for name in pools}
            for i in range(args.rounds):
                order = list(pools) if i % 2 == 0 else list(reversed(pools))
                for name in order:
                    per_call, walls = block(pools[name], spec, args.n)
                    cpu[name].append(per_call)
                    wall[name].extend(walls)
            for name in pools:
                print(f"  {name:>8}: pool loop CPU {statistics.median(cpu[name]):.3f} ms/call (blocks: "
                      f"{', '.join(f'{c:.3f}' for c in cpu[name])}); wall p50 {pct(wall[name], 50):.2f} ms, "
                      f"p95 {pct(wall[name], 95):.2f} ms")
            ratio = statistics.median(cpu["one_post"]) / statistics.median(cpu["sdk"])
            print(f"  one_post / sdk pool loop CPU: {ratio:.2f}x; wall p50 "
                  f"{pct(wall['one_post'], 50) - pct(wall['sdk'], 50):+.2f} ms")
        finally:
            for pool in pools.values():
                pool.shutdown()
    print(f"load average at end: {' '.join(open('/proc/loadavg').read().split()[:3])}")


if __name__ == "__main__":
    main()
