"""Toolhub's admin site: the tenant switcher, sections ordered by use, and a dashboard on the index.

The dashboard is assembled from panels that the apps above register (`register_panel`), so this module,
at the bottom of the app stack, imports none of them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.contrib import admin, messages
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect
from django.template.loader import render_to_string
from django.template.response import TemplateResponse
from django.urls import URLPattern, URLResolver, path, reverse
from django.utils.http import url_has_allowed_host_and_scheme

from tenants_app.admin_scoping import (
    COOKIE,
    COOKIE_MAX_AGE,
    COOKIE_SALT,
    current_tenant,
    manages_any_tenant,
    switch_tenant,
)
from tenants_app.models import Tenant
from tenants_app.selectors import tenants_for_admin

# Sections by how often people use them; models inside a section likewise. Unlisted ones follow, A-Z.
APP_ORDER = ["tools_app", "agents_app", "market_app", "tenants_app"]
MODEL_ORDER = {
    "tools_app": ["Tool", "Approval", "ToolFunction", "ToolCall"],
    "agents_app": ["Agent", "Conversation", "ChatModel", "IntentNode"],
    "market_app": ["MarketEntry", "MarketSource"],
    "tenants_app": ["Tenant", "Membership"],
}


@dataclass(frozen=True)
class Panel:
    """One dashboard box: `build(request, tenant)` returns its template context, or None to leave it out."""

    order: int
    template: str
    build: Callable[[HttpRequest, Tenant], dict[str, Any] | None]


_panels: list[Panel] = []


def register_panel(*, order: int, template: str, build: Callable[[HttpRequest, Tenant], dict[str, Any] | None]) -> None:
    if not any(p.template == template for p in _panels):
        _panels.append(Panel(order, template, build))
        _panels.sort(key=lambda p: p.order)


def _rank(order: list[str], key: str) -> tuple[int, str]:
    return (order.index(key) if key in order else len(order), key)


class ToolhubAdminSite(admin.AdminSite):
    site_header = "Toolhub administration"
    site_title = "Toolhub"
    index_title = "Dashboard"

    def get_app_list(self, request: HttpRequest, app_label: str | None = None) -> list[Any]:
        apps = super().get_app_list(request, app_label)
        for app in apps:
            order = MODEL_ORDER.get(app["app_label"], [])
            app["models"].sort(key=lambda m: _rank(order, m["object_name"]))
        apps.sort(key=lambda a: _rank(APP_ORDER, a["app_label"]))
        return apps

    def each_context(self, request: HttpRequest) -> dict[str, Any]:
        context = super().each_context(request)
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated and manages_any_tenant(request):
            context["toolhub_tenant"] = current_tenant(request)
            context["toolhub_tenants"] = list(tenants_for_admin(user=user).order_by("slug")[:500])
        return context

    def get_urls(self) -> list[URLResolver | URLPattern]:
        return [path("tenant/", self.admin_view(self.switch_tenant_view), name="switch_tenant"), *super().get_urls()]

    def switch_tenant_view(self, request: HttpRequest) -> HttpResponse:
        """POST tenant=<id>: work in that tenant from now on; back to the page's list (objects don't carry over)."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        tenant = switch_tenant(request, request.POST.get("tenant"))
        if tenant is None:
            messages.error(request, "You do not manage that tenant.")
            return HttpResponseRedirect(self._back_to(request))
        messages.success(request, f"Now working in tenant {tenant.slug} ({tenant.name}).")
        response = HttpResponseRedirect(self._back_to(request))
        response.set_signed_cookie(COOKIE, str(tenant.pk), salt=COOKIE_SALT, max_age=COOKIE_MAX_AGE, httponly=True,
                                   samesite="Lax", secure=request.is_secure())
        return response

    def _back_to(self, request: HttpRequest) -> str:
        index = reverse("admin:index", current_app=self.name)
        target = request.POST.get("next", "")
        if not target or not url_has_allowed_host_and_scheme(target, {request.get_host()}) or not target.startswith(index):
            return index
        # /admin/<app>/<model>/<id>/change/ -> /admin/<app>/<model>/: the object belongs to the old tenant.
        parts = [p for p in target[len(index):].split("?")[0].split("/") if p]
        return index + "/".join(parts[:2]) + "/" if len(parts) >= 2 else index

    def index(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> TemplateResponse:
        context = dict(extra_context or {})
        tenant = current_tenant(request) if manages_any_tenant(request) else None
        panels = []
        if tenant is not None:
            for panel in _panels:
                data = panel.build(request, tenant)
                if data is not None:
                    panels.append(render_to_string(panel.template, {"tenant": tenant, **data}, request=request))
        context["dashboard_panels"] = panels
        return super().index(request, context)
