"""The market panel of the admin dashboard: sources, their last refresh, updates for loaded tools."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.urls import reverse

from market_app import selectors
from market_app.admin import counts_line
from tenants_app.admin_site import register_panel
from tenants_app.models import Tenant


def _market(request: HttpRequest, tenant: Tenant) -> dict[str, Any]:
    rows = []
    for source, updates in selectors.sources_overview(tenant=tenant):
        if source.last_status == "error":
            result = f"error: {source.last_error}"
        else:
            result = counts_line(source.last_counts) if source.last_counts else "never refreshed"
        rows.append({"source": source, "result": result, "updates": updates,
                     "url": reverse("admin:market_app_marketsource_change", args=[source.pk])})
    return {"sources": rows, "sources_url": reverse("admin:market_app_marketsource_changelist")}


def register() -> None:
    register_panel(order=40, template="admin/dashboard/market.html", build=_market)
