"""The tools panels of the admin dashboard: health, the approvals waiting, and the last 24 h of calls."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.urls import reverse

from tenants_app.admin_site import register_panel
from tenants_app.models import Tenant
from tools_app import dashboard

CHART_W, CHART_H = 480, 110


def _health(request: HttpRequest, tenant: Tenant) -> dict[str, Any]:
    health = dashboard.tool_health(tenant=tenant)
    tools = reverse("admin:tools_app_tool_changelist")
    paused = [(tool, reverse("admin:tools_app_tool_change", args=[tool.pk]), max(1, int(left.total_seconds() // 60)))
              for tool, left in health.paused_tools]
    failing = [(tool, reverse("admin:tools_app_tool_change", args=[tool.pk])) for tool in health.failing_tools]
    return {"health": health, "tools_url": tools, "paused": paused, "failing": failing}


def _approvals(request: HttpRequest, tenant: Tenant) -> dict[str, Any]:
    pending = dashboard.pending_approvals(tenant=tenant, user=request.user)
    return {"pending": pending, "queue_url": reverse("admin:tools_app_approval_changelist")}


def hour_bars(hours: list[tuple[Any, int, int]], width: int = CHART_W, height: int = CHART_H) -> list[dict[str, Any]]:
    """SVG geometry for 24 hourly bars: calls in blue with the errors' share in red on top of it."""
    top = max((n for _, n, _ in hours), default=0) or 1
    step = width / max(1, len(hours))
    bars = []
    for i, (at, n, e) in enumerate(hours):
        h = round(n / top * (height - 14), 1)
        eh = round(e / top * (height - 14), 1)
        bars.append({"x": round(i * step + 1, 1), "w": round(step - 2, 1), "y": round(height - h, 1), "h": h,
                     "ey": round(height - h, 1), "eh": eh, "label": f"{at:%H}:00 — {n} call(s), {e} error(s)",
                     "tick": f"{at:%H}" if i % 6 == 0 else ""})
    return bars


def _activity(request: HttpRequest, tenant: Tenant) -> dict[str, Any]:
    activity = dashboard.call_activity(tenant=tenant)
    top = max((t.p95_ms for t in activity.tools), default=0) or 1
    rows = [{"t": t, "p50_w": round(t.p50_ms / top * 100, 1), "p95_w": round(t.p95_ms / top * 100, 1)}
            for t in activity.tools]
    return {"activity": activity, "bars": hour_bars(activity.hours), "chart_w": CHART_W, "chart_h": CHART_H,
            "tool_rows": rows, "calls_url": reverse("admin:tools_app_toolcall_changelist")}


def register() -> None:
    register_panel(order=10, template="admin/dashboard/tool_health.html", build=_health)
    register_panel(order=20, template="admin/dashboard/approvals.html", build=_approvals)
    register_panel(order=30, template="admin/dashboard/activity.html", build=_activity)
