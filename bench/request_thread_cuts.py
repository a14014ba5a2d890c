"""The request thread's two cuts of bench/load/PROFILE.md's 2026-12-06 22:00 section, each alone and side by side
in one process, in thread CPU per request (time.thread_time), so the machine's load hits both sides alike:

- URL resolution of the mix's paths: Django's resolver walk against core.resolve_cache;
- the generations read and the throttle count: two Redis round trips (the MGET, then the throttle's pipeline) against
  one (the count riding in the MGET's pipeline, core.throttle.counted_ahead).

    REDIS_URL=redis://127.0.0.1:6379/9 .venv/bin/python bench/request_thread_cuts.py [N] [ROUNDS]

Needs REDIS_URL (your own db number; the keys it writes are its own and deleted at the end).
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.dev")

import django  # noqa: E402

django.setup()

from django.core.cache import cache  # noqa: E402
from django.urls import get_resolver  # noqa: E402

from core import hotcache, resolve_cache  # noqa: E402
from core.throttle import _Ahead, _counts  # noqa: E402

N = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 5
PATHS = ["/api/v1/tools/", "/api/v1/tools/7/invoke/", "/api/v1/tools/12/invoke/"]


def per_call_us(work: Callable[[], object]) -> float:
    start = time.thread_time()
    for _ in range(N):
        work()
    return (time.thread_time() - start) / N * 1e6


def resolve_django() -> None:
    for path in PATHS:
        get_resolver().resolve(path)


def resolve_cached() -> None:
    for path in PATHS:
        resolve_cache.resolve(get_resolver(), path)


SCOPES = (hotcache.AUTH, hotcache.tenant_scope(1))
KEY = "throttle_bench_7"


def two_trips() -> None:
    with hotcache.request_scope():
        hotcache.generations(*SCOPES)
        window = int(time.time() // 60)
        _counts(cache, f"{KEY}:{window}", f"{KEY}:{window - 1}", 121)


def one_trip() -> None:
    with hotcache.request_scope():
        window = int(time.time() // 60)
        ahead = _Ahead(cache, f"{KEY}:{window}", f"{KEY}:{window - 1}", 121)
        with hotcache.riding(ahead):
            hotcache.generations(*SCOPES)
        assert ahead.counts is not None


def main() -> None:
    if not os.environ.get("REDIS_URL"):
        raise SystemExit("set REDIS_URL (your own db number)")
    pairs = {"resolve (3 paths)": (resolve_django, resolve_cached), "generations + throttle": (two_trips, one_trip)}
    for a, b in pairs.values():  # warm both sides (imports, connections, the LRU)
        a(), b()
    print(f"load average {os.getloadavg()[0]:.1f}; thread CPU us per call, {N} calls x {ROUNDS} rounds, alternated")
    for name, (before, after) in pairs.items():
        was, now = [], []
        for _ in range(ROUNDS):
            was.append(per_call_us(before))
            now.append(per_call_us(after))
        ratio = statistics.median(now) / statistics.median(was)
        print(f"{name:<24} before {statistics.median(was):7.1f} ({min(was):.1f}-{max(was):.1f})   "
              f"after {statistics.median(now):7.1f} ({min(now):.1f}-{max(now):.1f})   after/before {ratio:.2f}")
    window = int(time.time() // 60)
    cache.delete_many([f"{KEY}:{w}" for w in range(window - 2, window + 2)])
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
