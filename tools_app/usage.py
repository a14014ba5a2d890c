"""Usage of a tenant's tools read from the ToolCall audit: per tool calls, errors by code, latency, quota refusals."""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db.models import Q, Sum
from django.db.models.functions import Coalesce, TruncHour
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from core.codes import ApiCode
from core.errors import ValidationFailed
from tenants_app.models import Tenant
from tools_app.models import CallStatus, ToolCall
from tools_app.runtime.result import QUOTA_EXCEEDED

DEFAULT_WINDOW = timedelta(hours=24)
# Calls that ran or were refused; a call still waiting for a person has no outcome yet.
COUNTED = (CallStatus.OK, CallStatus.ERROR, CallStatus.DENIED)


class InvalidTime(ValidationFailed):
    code = ApiCode.INVALID_TIME


def _parse(name: str, text: str | None) -> datetime | None:
    if text is None or not text.strip():
        return None
    raw = text.strip()
    try:
        when = parse_datetime(raw.replace(" ", "+") if "T" in raw else raw)  # a `+` in a query string arrives as ` `
    except ValueError:
        when = None
    if when is None:
        raise InvalidTime(f"{name} must be an ISO 8601 time such as 2026-12-06T00:00:00Z; got {text!r}",
                          details={"field": name})
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def window(since: str | None, until: str | None) -> tuple[datetime, datetime]:
    """The report's [since, until) from the query (ISO 8601; naive times are UTC); default the last 24 hours."""
    end = _parse("until", until) or timezone.now()
    start = _parse("since", since) or end - DEFAULT_WINDOW
    if start >= end:
        raise InvalidTime("since must be before until", details={"field": "since"})
    return start, end


def _calls(tenant: Tenant, since: datetime, until: datetime) -> Any:
    return ToolCall.objects.filter(tenant=tenant, created_at__gte=since, created_at__lt=until, status__in=COUNTED)


def _percentile(ordered: list[int], share: float) -> int | None:
    if not ordered:
        return None
    return ordered[min(len(ordered) - 1, max(0, int(round(share * len(ordered) + 0.5)) - 1))]


def tool_usage(*, tenant: Tenant, since: datetime, until: datetime) -> list[dict[str, Any]]:
    """One row per tool called in the window, most called first (what `GET /usage/` answers)."""
    names: dict[Any, str] = {}
    calls: Counter[Any] = Counter()
    errors: dict[Any, Counter[str]] = defaultdict(Counter)
    latencies: dict[Any, list[int]] = defaultdict(list)
    refusals: Counter[Any] = Counter()
    rows = _calls(tenant, since, until).values_list("tool_id", "tool_name", "status", "error_code", "cost_ms",
                                                    "call_count")
    for tool_id, name, status, code, cost_ms, n in rows.iterator(chunk_size=2000):
        key = tool_id if tool_id is not None else f"deleted:{name}"
        names[key] = name
        calls[key] += n  # a row of folded quota refusals stands for n calls (tools_app.services.quota_refusals)
        if status != CallStatus.OK:
            errors[key][code or "ERROR"] += n
        if code == QUOTA_EXCEEDED:
            refusals[key] += n
        if status != CallStatus.DENIED:  # a refused call never ran: its latency is not the tool's
            latencies[key].append(int(cost_ms))
    out = []
    for key, count in calls.most_common():
        ordered = sorted(latencies[key])
        out.append({"tool": key if isinstance(key, int) else None, "name": names[key], "calls": count,
                    "errors": dict(errors[key]), "p50_ms": _percentile(ordered, 0.5),
                    "p95_ms": _percentile(ordered, 0.95), "quota_refusals": refusals[key]})
    return out


def top_members(*, tenant: Tenant, since: datetime, until: datetime, limit: int = 10) -> list[dict[str, Any]]:
    rows = (_calls(tenant, since, until).exclude(actor=None).values("actor__username")
            .annotate(calls=Sum("call_count"), errors=Coalesce(Sum("call_count", filter=~Q(status=CallStatus.OK)), 0))
            .order_by("-calls", "actor__username")[:limit])
    return [{"member": r["actor__username"], "calls": r["calls"], "errors": r["errors"]} for r in rows]


def hourly(*, tenant: Tenant, since: datetime, until: datetime) -> list[dict[str, Any]]:
    """Calls and errors per UTC hour of the window (every hour present, empty ones as 0)."""
    rows = (_calls(tenant, since, until).annotate(hour=TruncHour("created_at", tzinfo=UTC)).values("hour")
            .annotate(calls=Sum("call_count"), errors=Coalesce(Sum("call_count", filter=~Q(status=CallStatus.OK)), 0)))
    counted = {r["hour"].astimezone(UTC).replace(minute=0, second=0, microsecond=0): r for r in rows}
    hour = since.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    out = []
    while hour < until:
        row = counted.get(hour)
        out.append({"hour": hour, "calls": row["calls"] if row else 0, "errors": row["errors"] if row else 0})
        hour += timedelta(hours=1)
    return out
