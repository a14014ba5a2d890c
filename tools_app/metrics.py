"""Tool metrics: every finished call feeds the counters; breaker, approvals and pool are read at scrape time."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db.models import Count
from django.db.models.signals import post_save
from django.utils import timezone
from prometheus_client.core import Metric

from core import metrics
from core.codes import ResultCode
from tools_app.models import Approval, ApprovalStatus, CallStatus, FunctionState, Tool, ToolCall, ToolFunction

_FINAL = {CallStatus.OK, CallStatus.ERROR, CallStatus.DENIED}
_CODES = frozenset(str(code) for code in ResultCode)  # the error label's bounded set


def _observe_call(sender: Any, instance: ToolCall, **kwargs: Any) -> None:
    # A call saved as awaiting approval is counted when it settles (its row is saved again then); a row of folded
    # quota refusals was counted refusal by refusal, as each was answered (tools_app.services.quota_refusals).
    if instance.status not in _FINAL or getattr(instance, "_metrics_counted", False):
        return
    tenant = str(instance.tenant_id)
    metrics.TOOL_CALLS.labels(tenant, instance.tool_name, instance.function, instance.status).inc()
    for marker in instance.result_flags or []:
        metrics.TOOL_RESULTS_FLAGGED.labels(tenant, instance.tool_name, marker).inc()
    if instance.status != CallStatus.OK:
        code = instance.error_code if instance.error_code in _CODES else "OTHER"
        metrics.TOOL_CALL_ERRORS.labels(tenant, instance.tool_name, code).inc()
    if instance.status == CallStatus.OK or instance.cost_ms:
        metrics.TOOL_CALL_SECONDS.labels(tenant, instance.tool_name).observe(instance.cost_ms / 1000)


def _gauges() -> Iterable[Metric]:
    pending = (
        Approval.objects.filter(status=ApprovalStatus.PENDING, expires_at__gt=timezone.now())
        .values("tenant_id")
        .annotate(n=Count("id"))
    )
    yield metrics.gauge(
        "toolhub_approvals_pending", "Pending approvals", ["tenant"], ((([str(r["tenant_id"])]), r["n"]) for r in pending)
    )
    paused = Tool.objects.filter(disabled_until__gt=timezone.now()).values_list("tenant_id", "name")
    yield metrics.gauge(
        "toolhub_breaker_open", "Tools paused by the failure breaker (1 = open)", ["tenant", "tool"],
        (([str(t), name], 1) for t, name in paused),
    )
    yield metrics.gauge(
        "toolhub_screen_findings", "The screen's findings in the functions servers offer now",
        ["tenant", "tool", "severity", "status"], ((list(k), n) for k, n in _screen_counts().items()))
    from tools_app.wiring.pool import pool_stats

    stats = pool_stats()
    yield metrics.gauge("toolhub_pool_sessions", "Open pooled MCP sessions", [], [([], stats.get("open_sessions", 0))])
    yield metrics.gauge(
        "toolhub_pool_processes_spawned", "MCP server processes this process started", [],
        [([], stats.get("processes_spawned", 0))],
    )
    runners = stats.get("runners") or []
    yield metrics.gauge(
        "toolhub_runner_servers", "LOCAL MCP servers each live runner holds (runner tier)", ["runner", "draining"],
        (([str(r["id"]), str(bool(r["draining"])).lower()], r["servers"]) for r in runners),
    )
    if "runner_announcements_rejected" in stats:
        yield metrics.gauge(
            "toolhub_runner_announcements_rejected",
            "Runner announcements and draining marks in Redis this process ignored (forged, unsigned or expired)",
            [], [([], stats["runner_announcements_rejected"])],
        )


def _screen_counts() -> dict[tuple[str, str, str, str], int]:
    counts: dict[tuple[str, str, str, str], int] = {}
    rows = (ToolFunction.objects.exclude(screen_findings=[]).exclude(state=FunctionState.REMOVED)
            .values_list("tool__tenant_id", "tool__name", "screen_status", "screen_findings"))
    for tenant_id, tool, status, findings in rows:
        for finding in findings or []:
            key = (str(tenant_id), tool, str(finding.get("severity", "")), status)
            counts[key] = counts.get(key, 0) + 1
    return counts


def connect() -> None:
    post_save.connect(_observe_call, sender=ToolCall, dispatch_uid="toolhub-metrics-toolcall")
    metrics.register_gauges(_gauges)
