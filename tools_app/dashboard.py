"""Dashboard reads (selectors) for the admin index: tool health, pending approvals, the last 24 h of calls.

Each function takes the tenant first and runs a fixed number of queries, whatever the data size.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, Max, Min, Q, QuerySet
from django.db.models.functions import TruncHour
from django.utils import timezone

from tenants_app.models import Tenant
from tools_app.models import Approval, ApprovalStatus, CallStatus, Tool, ToolCall, ToolStatus, ToolType
from tools_app.policies import approvals_visible

CHECKED_TYPES = (ToolType.LOCAL, ToolType.REMOTE)  # the health beat probes these
PERCENTILE_SAMPLE = 20_000  # calls read for p50/p95; past this the figures come from the newest calls
TOP_TOOLS = 12
LISTED = 8


@dataclass
class Health:
    ok: int = 0
    failing: int = 0
    paused: int = 0
    never_checked: int = 0
    unchecked_types: int = 0  # built-in and HTTP tools: no health probe
    disabled: int = 0
    paused_tools: list[tuple[Tool, timedelta]] = field(default_factory=list)
    failing_tools: list[Tool] = field(default_factory=list)


def tool_health(*, tenant: Tenant, now: datetime | None = None) -> Health:
    """Enabled MCP tools by health (ok / failing / paused by the breaker / never checked); 3 queries."""
    now = now or timezone.now()
    tools = Tool.objects.filter(tenant=tenant)
    checked = Q(status=ToolStatus.ENABLED, type__in=CHECKED_TYPES)
    paused = checked & Q(disabled_until__gt=now)
    failing = checked & ~Q(disabled_until__gt=now) & Q(consecutive_failures__gt=0)
    healthy = checked & ~Q(disabled_until__gt=now) & Q(consecutive_failures=0) & Q(last_ok_at__isnull=False)
    never = checked & ~Q(disabled_until__gt=now) & Q(consecutive_failures=0) & Q(last_ok_at__isnull=True)
    counts = tools.aggregate(
        ok=Count("pk", filter=healthy), failing=Count("pk", filter=failing), paused=Count("pk", filter=paused),
        never=Count("pk", filter=never), disabled=Count("pk", filter=Q(status=ToolStatus.DISABLED)),
        other=Count("pk", filter=Q(status=ToolStatus.ENABLED) & ~Q(type__in=CHECKED_TYPES)),
    )
    health = Health(ok=counts["ok"], failing=counts["failing"], paused=counts["paused"],
                    never_checked=counts["never"], disabled=counts["disabled"], unchecked_types=counts["other"])
    health.paused_tools = [(t, t.disabled_until - now) for t in tools.filter(paused).order_by("disabled_until")[:LISTED]
                           if t.disabled_until is not None]
    health.failing_tools = list(tools.filter(failing).order_by("-consecutive_failures", "name")[:LISTED])
    return health


@dataclass
class PendingApprovals:
    count: int
    calls: int
    oldest: datetime | None


def pending_approvals(*, tenant: Tenant, user: Any, now: datetime | None = None) -> PendingApprovals:
    """Pending, unexpired approvals this user may see (the queue's default view); 1 query."""
    now = now or timezone.now()
    qs: QuerySet[Approval] = approvals_visible(tenant=tenant, user=user).filter(
        status=ApprovalStatus.PENDING, expires_at__gt=now)
    row = qs.aggregate(count=Count("pk"), oldest=Min("created_at"))
    calls = sum(qs.values_list("count", flat=True)[:1000]) if row["count"] else 0
    return PendingApprovals(count=row["count"], calls=calls, oldest=row["oldest"])


@dataclass
class ToolCalls:
    tool: str
    calls: int
    errors: int
    p50_ms: int
    p95_ms: int
    tool_id: int | None = None  # the tool's calls in the admin (None once the tool is deleted)


@dataclass
class Activity:
    since: datetime
    calls: int
    errors: int
    hours: list[tuple[datetime, int, int]]  # (hour start, calls, errors), oldest first, 24 entries
    tools: list[ToolCalls]
    sampled: bool  # percentiles from the newest PERCENTILE_SAMPLE calls only


def _percentile(sorted_values: list[int], q: float) -> int:
    if not sorted_values:
        return 0
    index = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[index]


def call_activity(*, tenant: Tenant, now: datetime | None = None) -> Activity:
    """Calls and errors over the last 24 h, by hour and by tool, with p50/p95 cost per tool; 3 queries.

    Errors are failed calls (`error`); denied and held calls are counted as calls, not errors.
    """
    now = now or timezone.now()
    since = now - timedelta(hours=24)
    calls = ToolCall.objects.filter(tenant=tenant, created_at__gte=since)
    is_error = Q(status=CallStatus.ERROR)
    by_hour = {row["hour"]: row for row in calls.annotate(hour=TruncHour("created_at")).values("hour")
               .annotate(n=Count("pk"), e=Count("pk", filter=is_error)).order_by()}
    start = (now - timedelta(hours=23)).replace(minute=0, second=0, microsecond=0)
    hours = []
    for i in range(24):
        at = start + timedelta(hours=i)
        counted: dict[str, Any] = dict(by_hour.get(at) or {})
        hours.append((at, int(counted.get("n", 0)), int(counted.get("e", 0))))
    per_tool = list(calls.values("tool_name").annotate(n=Count("pk"), e=Count("pk", filter=is_error), tid=Max("tool"))
                    .order_by("-n", "tool_name")[:TOP_TOOLS])
    names = [row["tool_name"] for row in per_tool]
    costs: dict[str, list[int]] = {name: [] for name in names}
    # Cost of calls that ran: a held or denied call costs 0 ms and would drag p50 down to nothing.
    ran = calls.filter(status__in=[CallStatus.OK, CallStatus.ERROR])
    sample = list(ran.filter(tool_name__in=names).order_by("-created_at")
                  .values_list("tool_name", "cost_ms")[:PERCENTILE_SAMPLE])
    for name, cost in sample:
        costs[name].append(int(cost))
    tools = []
    for tool_row in per_tool:
        values = sorted(costs[tool_row["tool_name"]])
        tools.append(ToolCalls(tool=tool_row["tool_name"], calls=tool_row["n"], errors=tool_row["e"],
                               p50_ms=_percentile(values, 0.50), p95_ms=_percentile(values, 0.95),
                               tool_id=tool_row["tid"]))
    total = sum(int(r["n"]) for r in by_hour.values())
    errors = sum(int(r["e"]) for r in by_hour.values())
    return Activity(since=since, calls=total, errors=errors, hours=hours,
                    tools=tools, sampled=len(sample) >= PERCENTILE_SAMPLE)
