"""Admin "Quotas" (written through tools_app.services.quotas) and the tenant's usage page beside them."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django import forms
from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone

from tenants_app.admin_scoping import ServiceAdminMixin, current_tenant
from tenants_app.models import Tenant
from tools_app import usage
from tools_app.admin.dashboard import hour_bars
from tools_app.models import Quota, QuotaScope, Tool
from tools_app.services import quotas

_QuotaAdmin = admin.ModelAdmin[Quota]
CHART_W, CHART_H = 720, 140


class QuotaForm(forms.ModelForm[Quota]):
    target = forms.CharField(required=False, help_text="The member's username, the agent or tool id. Empty: the "
                             "tenant (scope tenant), else the default of each member, agent or tool.")

    class Meta:
        model = Quota
        fields = ["tenant", "scope", "target", "per_minute", "per_day", "concurrent"]


@admin.register(Quota)
class QuotaAdmin(ServiceAdminMixin, _QuotaAdmin):
    form = QuotaForm
    list_display = ["scope", "target_shown", "per_minute", "per_day", "concurrent", "updated_at"]
    list_filter = ["scope"]
    change_list_template = "admin/tools_app/quota/change_list.html"

    @admin.display(description="Target", ordering="target")
    def target_shown(self, obj: Quota) -> str:
        return obj.target or ("(the tenant)" if obj.scope == QuotaScope.TENANT else f"(each {obj.scope})")

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return ["scope"] if obj is not None else []

    def save_model(self, request: HttpRequest, obj: Quota, form: Any, change: bool) -> None:
        data = form.cleaned_data
        values = quotas.QuotaInput(target=data.get("target", ""), per_minute=data.get("per_minute"),
                                   per_day=data.get("per_day"), concurrent=data.get("concurrent"))
        if change:
            saved = self.call_service(request, quotas.quota_update, tenant=obj.tenant, quota_id=obj.pk, changes=values)
        else:
            values = quotas.QuotaInput(scope=data.get("scope"), target=values.target, per_minute=values.per_minute,
                                       per_day=values.per_day, concurrent=values.concurrent)
            saved = self.call_service(request, quotas.quota_create, tenant=data["tenant"], data=values)
        obj.pk = saved.pk
        obj.refresh_from_db()

    def delete_model(self, request: HttpRequest, obj: Quota) -> None:
        self.call_service(request, quotas.quota_delete, tenant=obj.tenant, quota_id=obj.pk)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Quota]) -> None:
        for quota in queryset:
            self.delete_model(request, quota)

    def get_urls(self) -> list[Any]:
        return [path("usage/", self.admin_site.admin_view(self.usage_view), name="tools_app_quota_usage"),
                *super().get_urls()]

    def usage_view(self, request: HttpRequest) -> HttpResponse:
        """The current tenant's last 24 hours (or `?days=7`): calls, errors, slowest tools, top members, quota
        headroom and calls per hour, drawn on the server (no script, no CDN)."""
        tenant = current_tenant(request)
        if tenant is None or not self.has_view_permission(request):
            return TemplateResponse(request, "admin/tools_app/quota/usage.html",
                                    {**self.admin_site.each_context(request), "title": "Usage", "tenant": None})
        days = 7 if request.GET.get("days") == "7" else 1
        until = timezone.now()
        since = until - timedelta(days=days)
        tools = usage.tool_usage(tenant=tenant, since=since, until=until)
        hours = usage.hourly(tenant=tenant, since=since, until=until)
        slowest = sorted((t for t in tools if t["p95_ms"] is not None), key=lambda t: -t["p95_ms"])[:10]
        top = max((t["p95_ms"] for t in slowest), default=0) or 1
        headroom = _headroom(tenant)
        context = {
            **self.admin_site.each_context(request), "title": f"Usage of {tenant.name}", "tenant": tenant,
            "days": days, "since": since, "until": until,
            "calls": sum(t["calls"] for t in tools),
            "errors": sum(sum(t["errors"].values()) for t in tools),
            "refusals": sum(t["quota_refusals"] for t in tools),
            "tools": tools,
            "slowest": [{**t, "w": round(t["p95_ms"] / top * 100, 1)} for t in slowest],
            "members": usage.top_members(tenant=tenant, since=since, until=until),
            "headroom": headroom,
            "bars": hour_bars([(h["hour"], h["calls"], h["errors"]) for h in hours], CHART_W, CHART_H),
            "chart_w": CHART_W, "chart_h": CHART_H,
            "quotas_url": reverse("admin:tools_app_quota_changelist"),
            "opts": self.model._meta,
        }
        return TemplateResponse(request, "admin/tools_app/quota/usage.html", context)


def _headroom(tenant: Tenant) -> list[dict[str, Any]]:
    """One row per limit of every quota: allowed, used (None: not counted) and the share used, in percent."""
    rows = []
    tool_names = dict(Tool.objects.filter(tenant=tenant).values_list("pk", "name"))
    for row in quotas.headroom(tenant=tenant):
        quota = row["quota"]
        named = tool_names.get(quota.target_id, "") if quota.scope == QuotaScope.TOOL else ""
        for name, allowed in row["limits"].items():
            used = row["used"].get(name) if row["used"] else None
            rows.append({"quota": quota, "named": named, "limit": name, "allowed": allowed, "used": used,
                         "share": _share(used, allowed), "left": None if used is None else max(0, allowed - used)})
    return rows


def _share(used: int | None, allowed: int) -> int:
    if used is not None and allowed:
        return min(100, round(100 * used / allowed))
    return 100 if allowed == 0 else 0
