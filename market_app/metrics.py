"""Market metrics: each source's last refresh, read at scrape time."""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.core import Metric

from core import metrics
from market_app.models import MarketSource


def _gauges() -> Iterable[Metric]:
    rows = MarketSource.objects.exclude(last_refresh_at=None).values_list("id", "name", "last_status", "last_refresh_at")
    yield metrics.gauge(
        "toolhub_market_last_refresh_timestamp", "When each market source last refreshed, by its result",
        ["source", "name", "status"],
        (([str(i), name, status or "unknown"], at.timestamp()) for i, name, status, at in rows if at is not None),
    )


def connect() -> None:
    metrics.register_gauges(_gauges)
