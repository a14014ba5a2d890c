"""Prometheus metrics: the one registry, the metric families every app observes, and the guarded /metrics view."""

from __future__ import annotations

import ipaddress
import os
import secrets
from collections.abc import Callable, Iterable
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

# Process-wide families. Under several web/worker processes set PROMETHEUS_MULTIPROC_DIR (deploy/ does) and
# every process writes its samples there; the view then aggregates them.
REGISTRY = CollectorRegistry(auto_describe=True)
_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)

TOOL_CALLS = Counter(
    "toolhub_tool_calls", "Tool calls by outcome", ["tenant", "tool", "function", "status"], registry=REGISTRY
)
TOOL_RESULTS_FLAGGED = Counter(
    "toolhub_tool_results_flagged", "Tool results that carried text aimed at the model (the screen's markers)",
    ["tenant", "tool", "marker"], registry=REGISTRY,
)
TOOL_CALL_SECONDS = Histogram(
    "toolhub_tool_call_seconds", "Tool call latency", ["tenant", "tool"], buckets=_LATENCY_BUCKETS, registry=REGISTRY
)
CHAT_TURNS = Counter("toolhub_chat_turns", "Assistant turns of agent chats", ["tenant", "agent"], registry=REGISTRY)
MODEL_SECONDS = Histogram(
    "toolhub_model_seconds", "Chat model call latency", ["tenant", "agent"], buckets=_LATENCY_BUCKETS, registry=REGISTRY
)
MARKET_REFRESHES = Counter(
    "toolhub_market_refreshes", "Market source refreshes by result", ["source", "status"], registry=REGISTRY
)

GaugeReader = Callable[[], Iterable[Metric]]
_readers: list[GaugeReader] = []


def register_gauges(reader: GaugeReader) -> None:
    """Apps add scrape-time gauges (read from the database or the pool) without core importing them."""
    if reader not in _readers:
        _readers.append(reader)


def gauge(name: str, doc: str, labels: list[str], rows: Iterable[tuple[list[str], float]]) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, doc, labels=labels)
    for values, value in rows:
        family.add_metric(values, value)
    return family


class _AppGauges(Collector):
    def collect(self) -> Iterable[Metric]:
        for reader in _readers:
            yield from reader()


def render() -> bytes:
    """The exposition text: this process's (or all processes') families, then the apps' gauges."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]  # unannotated upstream
    else:
        registry = REGISTRY
    gauges = CollectorRegistry()
    gauges.register(_AppGauges())
    return generate_latest(registry) + generate_latest(gauges)


def _allowed(request: HttpRequest) -> bool:
    token = getattr(settings, "TOOLHUB_METRICS_TOKEN", "")
    header = request.headers.get("Authorization", "")
    if token and header.startswith("Bearer ") and secrets.compare_digest(header[7:].strip(), token):
        return True
    try:
        address = ipaddress.ip_address(request.META.get("REMOTE_ADDR", ""))
    except ValueError:
        return False
    return any(address in network for network in settings.TOOLHUB_METRICS_ALLOW)


def metrics_view(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
    """GET /metrics: a Bearer TOOLHUB_METRICS_TOKEN, or a client address inside TOOLHUB_METRICS_ALLOW."""
    if not _allowed(request):
        # The same answer as an unknown path: scanners learn nothing.
        return HttpResponse("Not found.", status=404, content_type="text/plain")
    return HttpResponse(render(), content_type=CONTENT_TYPE_LATEST)
