"""Benchmark: fetch + parse a 10,000-entry official registry over loopback, then an empty incremental."""

from __future__ import annotations

import argparse
import json
import ssl
import sys
import time
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx2

from core.outbound import OutboundPolicy
from market_app.catalog import FetchResult, fetch_catalog, parse_document
from tests.fixtures.catalog_server import CatalogServer, Registry


def timed(run: Callable[[], Any]) -> tuple[Any, float]:
    started = time.perf_counter()
    result = run()
    return result, time.perf_counter() - started


def peak_mib(run: Callable[[], Any]) -> float:
    tracemalloc.start()
    try:
        run()
        return tracemalloc.get_traced_memory()[1] / 1024 / 1024
    finally:
        tracemalloc.stop()


@contextmanager
def shared_ssl_context() -> Iterator[None]:
    """What-if: every httpx2.Client built by the guard reuses one SSL context instead of loading the
    CA bundle again (outbound.fetch builds one Client per request)."""
    context = ssl.create_default_context()
    original = httpx2.Client

    class SharedContextClient(original):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs.setdefault("verify", context)
            super().__init__(*args, **kwargs)

    httpx2.Client = SharedContextClient  # type: ignore[misc]
    try:
        yield
    finally:
        httpx2.Client = original  # type: ignore[misc]


def row(label: str, seconds: float, result: FetchResult | None = None, extra: str = "") -> None:
    counts = f"entries {len(result.entries):6d}  pages {result.pages:4d}  errors {len(result.errors)}" if result else ""
    print(f"{label:<44} {seconds * 1000:9.1f} ms  {counts}{extra}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--page-limit", type=int, default=100)
    args = parser.parse_args()
    policy = OutboundPolicy.build("127.0.0.0/8,::1", max_bytes=5 * 1024 * 1024, timeout_s=30)
    registry = Registry.generate(args.entries)
    with CatalogServer() as server:
        server.registry(registry)

        def full() -> FetchResult:
            return fetch_catalog(server.base, "official_registry", policy=policy, page_limit=args.page_limit)

        print(f"loopback official registry: {args.entries} servers, page limit {args.page_limit}")
        result, full_s = timed(full)
        assert result.full and len(result.entries) == args.entries, "full listing incomplete"
        row("full fetch+parse", full_s, result)
        since = result.next_updated_since

        def incremental() -> FetchResult:
            return fetch_catalog(server.base, "official_registry", policy=policy, updated_since=since,
                                 page_limit=args.page_limit)

        incr, incr_s = timed(incremental)
        assert not incr.full and not incr.entries and incr.next_updated_since == since
        row("incremental, nothing new", incr_s, incr)

        pages = [json.dumps(registry.page({"limit": str(args.page_limit), "cursor": str(start)})).encode()
                 for start in range(0, args.entries, args.page_limit)]
        _, parse_s = timed(lambda: [parse_document(json.loads(p), "official_registry") for p in pages])
        row("parse only (json.loads + map, no HTTP)", parse_s)

        with shared_ssl_context():
            shared, shared_s = timed(full)
        row("what-if: full with one shared SSL context", shared_s, shared)

        peak = peak_mib(full)
    print(f"peak traced memory, full fetch+parse: {peak:.1f} MiB")
    print(f"per entry (full): {full_s / args.entries * 1e6:.0f} µs; parse share of full: {parse_s / full_s:.0%}")
    print(f"ratios: incremental/full {incr_s / full_s:.4f}; shared-SSL-context/current {shared_s / full_s:.2f}")


if __name__ == "__main__":
    main()
