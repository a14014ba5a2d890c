"""Admin "Refused calls": calls refused for bad input, with the reason, so admins see what models get wrong."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin
from django.db.models import Count, QuerySet
from django.http import HttpRequest, HttpResponse
from django.utils.html import format_html

from tenants_app.admin_scoping import ReadOnlyAdminMixin, person, tenant_filter
from tenants_app.selectors import tenants_for_admin
from tools_app.models import RefusedCall
from tools_app.services.invoke import REFUSED_CODES

# Generic in their model for the type checker (django_stubs_ext.monkeypatch() in the settings makes Django's
# classes subscriptable at run time too).
_RefusedCallAdmin = admin.ModelAdmin[RefusedCall]

TOP_REASONS = 10


@admin.register(RefusedCall)
class RefusedCallAdmin(ReadOnlyAdminMixin, _RefusedCallAdmin):
    """Argument validation errors and tools' refusals, newest first, tenant-scoped; the most frequent on top."""

    # Tool and function in one column, the code above its reason, where it came from in another (as the tool-call
    # list shows them): nine separate columns made the reason a word wide and the table scroll at 1280 px.
    list_display = ["created_at", "tenant", "call", "reason", "origin"]
    list_filter = [tenant_filter(), "error_code", "via", "tool_name"]
    search_fields = ["tool_name", "function", "error"]
    readonly_fields = fields = ("created_at", "tenant", "tool_name", "function", "title", "error_code", "error",
                                "arguments_json", "via", "agent", "conversation", "actor_name", "status")
    change_list_template = "admin/tools_app/refusedcall/change_list.html"
    list_select_related = ["tenant", "agent", "actor"]
    actor_name = person("actor", "Actor")

    def get_queryset(self, request: HttpRequest) -> QuerySet[RefusedCall]:
        return (super().get_queryset(request)
                .filter(tenant__in=tenants_for_admin(user=request.user), error_code__in=REFUSED_CODES))

    @admin.display(description="Call", ordering="tool_name")
    def call(self, obj: RefusedCall) -> str:
        return format_html("{}<br><small>{}</small>", obj.tool_name, obj.function)

    @admin.display(description="Via", ordering="via")
    def origin(self, obj: RefusedCall) -> str:
        who = " · ".join(str(x) for x in (obj.agent, obj.actor) if x is not None)
        return format_html("{}<br><small>{}</small>", obj.via_label(), who)

    @admin.display(description="Reason", ordering="error_code")
    def reason(self, obj: RefusedCall) -> str:
        text = obj.error if len(obj.error) <= 160 else obj.error[:157] + "..."
        return format_html("<small>{}</small><br>{}", obj.error_code, text)

    @admin.display(description="arguments (secrets redacted)")
    def arguments_json(self, obj: RefusedCall) -> str:
        return format_html("<pre>{}</pre>", json.dumps(obj.arguments, indent=2, ensure_ascii=False, default=str))

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        response = super().changelist_view(request, extra_context)
        context = getattr(response, "context_data", None)
        if context is not None and "cl" in context:
            # The most frequent reasons among the rows the viewer filtered to (their tenants only).
            rows = (context["cl"].queryset.order_by().values("tool_name", "function", "error_code", "error")
                    .annotate(count=Count("id")).order_by("-count", "tool_name")[:TOP_REASONS])
            context["top_reasons"] = list(rows)
        return response
