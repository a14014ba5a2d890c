"""Connect/close cycles through SessionPool.probe: child processes and open fds before/after (leak check)."""

from __future__ import annotations

import argparse
import time
import uuid

from _common import child_processes, marked_processes, open_fds, summary

from core.outbound import OutboundPolicy
from tests.fixtures.mcp_servers import IGNORE_SIGTERM, INVENTORY, MINI, PYTHON
from tools_app.configs import server_spec as spec_from_config
from tools_app.runtime.mcp import SessionPool


def cycles(pool: SessionPool, script: str, n: int, label: str) -> None:
    marker = uuid.uuid4().hex
    spec = spec_from_config(
        tool_id=1, config_version=1, tenant_key="bench", tool_type="LOCAL",
        config={"command": PYTHON, "args": [script], "env": {"BENCH_MARKER": marker}, "startup_timeout_s": 60},
    )
    pool.probe(spec)  # warm-up: the pool's loop thread (epoll + self-pipe fds) exists before we count
    fds_before, kids_before = open_fds(), child_processes()
    samples = []
    started_all = time.monotonic()
    for _ in range(n):
        started = time.perf_counter()
        pool.probe(spec)
        samples.append((time.perf_counter() - started) * 1000)
    elapsed = time.monotonic() - started_all
    time.sleep(0.2)
    print(
        f"{label}: {n} cycles in {elapsed:.1f} s; connect+init+list+close {summary(samples)}\n"
        f"    children of ours before/after: {kids_before}/{child_processes()}; "
        f"processes left with this run's marker (incl. grandchildren, orphans): {marked_processes(marker)}; "
        f"open fds before/after: {fds_before}/{open_fds()}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mini", type=int, default=500, help="cycles of the dependency-free stdio inventory server")
    parser.add_argument("--sdk", type=int, default=30, help="cycles of the SDK-built inventory server (~1-2 s CPU each)")
    parser.add_argument("--stubborn", type=int, default=20, help="cycles of the SIGTERM-ignoring server")
    args = parser.parse_args()
    pool = SessionPool(policy=OutboundPolicy.build(""))
    try:
        cycles(pool, str(MINI), args.mini, "stdio inventory (mini)")
        cycles(pool, str(INVENTORY), args.sdk, "stdio inventory (SDK MCPServer)")
        cycles(pool, str(IGNORE_SIGTERM), args.stubborn, "SIGTERM-ignoring server + grandchild")
        print(f"pool stats: {pool.stats()}")
    finally:
        pool.shutdown()


if __name__ == "__main__":
    main()
