"""Connecting to a stdio server that leaves server/discover unanswered: the SDK's 10 s discover wait (before), the
short first probe (TOOLHUB_MCP_STDIO_DISCOVER_S, default 2 s), and the next connection of the same tool revision
(the era remembered: straight to the handshake). A server that answers discover at once is shown for reference.

    .venv/bin/python bench/stdio_discover.py [-n 3]

Each figure is a Test-style probe (spawn, negotiate, list, close) through Toolhub's SessionPool, unsandboxed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from _common import ROOT  # noqa: F401 - puts the repository on sys.path

from core.outbound import OutboundPolicy
from tests.fixtures.mcp_servers import MODERN_ONLY, SILENT_UNKNOWN
from tools_app.configs import server_spec
from tools_app.runtime.mcp import SessionPool, connection


def spec(script: object, tool_id: int) -> object:
    return server_spec(tool_id=tool_id, config_version=1, tenant_key="bench", tool_type="LOCAL",
                       config={"command": sys.executable, "args": [str(script)], "startup_timeout_s": 30})


def probe_ms(pool: SessionPool, target: object) -> float:
    started = time.perf_counter()
    pool.probe(target)  # type: ignore[arg-type]
    return (time.perf_counter() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-n", type=int, default=3)
    args = parser.parse_args()
    print(f"load average: {' '.join(open('/proc/loadavg').read().split()[:3])} (shared machine)")
    rows: dict[str, list[float]] = {"before (10 s probe)": [], "first probe (2 s)": [], "remembered": [],
                                    "2026 server, first": [], "2026 server, remembered": []}
    policy = OutboundPolicy.build("127.0.0.0/8")
    slow, fast = SessionPool(policy=policy, stdio_discover_s=10.0), SessionPool(policy=policy)
    try:
        for i in range(args.n):
            silent, modern = spec(SILENT_UNKNOWN, 7000 + i), spec(MODERN_ONLY, 8000 + i)
            rows["before (10 s probe)"].append(probe_ms(slow, silent))
            connection._stdio_eras.clear()
            rows["first probe (2 s)"].append(probe_ms(fast, silent))
            rows["remembered"].append(probe_ms(fast, silent))
            rows["2026 server, first"].append(probe_ms(fast, modern))
            rows["2026 server, remembered"].append(probe_ms(fast, modern))
            connection._stdio_eras.clear()
    finally:
        slow.shutdown()
        fast.shutdown()
    before = statistics.median(rows["before (10 s probe)"])
    for label, samples in rows.items():
        median = statistics.median(samples)
        print(f"{label:26s} median {median:8.0f} ms  ({before / median:5.1f}x faster than before)")


if __name__ == "__main__":
    main()
