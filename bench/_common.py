"""Shared helpers for the MCP benchmarks: percentiles, process and fd counts."""

from __future__ import annotations

import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def summary(samples_ms: list[float]) -> str:
    return (
        f"n={len(samples_ms)} p50={pct(samples_ms, 50):.2f} ms p95={pct(samples_ms, 95):.2f} ms "
        f"mean={statistics.fmean(samples_ms):.2f} ms"
    )


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def marked_processes(marker: str) -> int:
    """Live processes (any parent) whose environment carries BENCH_MARKER=<marker>."""
    needle = f"BENCH_MARKER={marker}".encode()
    count = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if needle in Path(f"/proc/{entry}/environ").read_bytes():
                state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
                count += state != "Z"
        except OSError:
            continue
    return count


def child_processes() -> int:
    me = str(os.getpid())
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            count += fields[1] == me
    return count
