"""Benchmark: source_refresh of a 10,000-entry loopback registry into a scratch SQLite DB (time, queries, memory)."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def setup_django(db_path: Path) -> None:
    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings.test"
    os.environ["DATABASE_URL"] = f"sqlite:///{db_path}"
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)


def measured(run: Callable[[], Any]) -> tuple[Any, float, int]:
    """(result, seconds, queries) of one call."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as ctx:
        started = time.perf_counter()
        result = run()
        seconds = time.perf_counter() - started
    return result, seconds, len(ctx.captured_queries)


def row(label: str, seconds: float, queries: int, entries: int, counts: dict[str, Any]) -> None:
    per = queries / entries if entries else 0.0
    brief = {k: counts[k] for k in ("added", "updated", "unchanged", "removed", "errors_total")}
    print(f"{label:<40} {seconds * 1000:9.1f} ms  queries {queries:5d} ({per:.4f}/entry)  {brief}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--entries", type=int, default=10_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        setup_django(Path(scratch) / "bench.sqlite3")
        from market_app.models import MarketSource
        from market_app.services import source_refresh
        from tests.fixtures.catalog_server import REGISTRY_EPOCH, CatalogServer, Registry, registry_item

        registry = Registry.generate(args.entries)
        n = args.entries
        with CatalogServer() as server:
            server.registry(registry)

            def new_source(name: str) -> MarketSource:
                return MarketSource.objects.create(name=name, url=server.base, format="official_registry")

            source = new_source("bench")
            print(f"loopback official registry, {n} servers, page limit 100, SQLite scratch DB")
            counts, full_s, full_q = measured(lambda: source_refresh(source_id=source.pk))
            assert counts["added"] == n, counts
            row("full refresh (all added)", full_s, full_q, n, counts)

            counts, incr_s, incr_q = measured(lambda: source_refresh(source_id=source.pk))
            assert counts["added"] == counts["updated"] == 0, counts
            row("incremental, no change", incr_s, incr_q, n, counts)

            MarketSource.objects.filter(pk=source.pk).update(cursor="")
            counts, same_s, same_q = measured(lambda: source_refresh(source_id=source.pk))
            assert counts["unchanged"] == n, counts
            row("full listing, all unchanged", same_s, same_q, n, counts)

            later = REGISTRY_EPOCH.replace(year=2026)
            for i in range(0, n, 10):  # every 10th server gets a new version
                registry.items[i] = registry_item(i, later)
                registry.items[i]["server"]["version"] = "2.0.0"
            MarketSource.objects.filter(pk=source.pk).update(cursor="")
            counts, upd_s, upd_q = measured(lambda: source_refresh(source_id=source.pk))
            assert counts["updated"] == n // 10, counts
            row("full listing, 10% updated", upd_s, upd_q, n, counts)

            del registry.items[n // 2:]
            MarketSource.objects.filter(pk=source.pk).update(cursor="")
            counts, rm_s, rm_q = measured(lambda: source_refresh(source_id=source.pk))
            assert counts["removed"] == n - n // 2, counts
            row("full listing, half removed", rm_s, rm_q, n, counts)

            registry.items[:] = Registry.generate(n).items
            fresh = new_source("bench-memory")
            tracemalloc.start()
            source_refresh(source_id=fresh.pk)
            peak = tracemalloc.get_traced_memory()[1] / 1024 / 1024
            tracemalloc.stop()
    print(f"peak traced memory, full refresh of {n}: {peak:.1f} MiB")
    print(f"per entry (full, all added): {full_s / n * 1e6:.0f} µs; incremental no-change goal <= 1 s: "
          f"{'met' if incr_s <= 1.0 else 'MISSED'} ({incr_s:.3f} s)")
    print(f"ratios: incremental/full {incr_s / full_s:.4f}; unchanged-full/full {same_s / full_s:.2f}; "
          f"10%-updated/full {upd_s / full_s:.2f}")


if __name__ == "__main__":
    main()
