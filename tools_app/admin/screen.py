"""Admin "Screen findings": every function the screen found something in, per tenant and tool, with the text as
the model reads it (invisible characters made visible) and each finding highlighted in place; above them, the
servers whose own texts (instructions, prompts, resources) have findings."""

from __future__ import annotations

import html
from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from tenants_app.admin_scoping import ReadOnlyAdminMixin
from tenants_app.selectors import tenants_for_admin
from tools_app.models import FunctionState, ScreenedFunction, Tool, ToolFunction
from tools_app.runtime import screen as rules
from tools_app.runtime.screen import reveal

_ScreenedAdmin = admin.ModelAdmin[ScreenedFunction]
SEVERITY_CSS = {"high": "#ba2121", "medium": "#b36b00", "low": "#666"}


def revealed(text: str) -> str:
    """The text as a model reads it, invisible characters shown as ⟨U+XXXX⟩."""
    return reveal(text or "")


def highlighted(text: str, findings: list[dict[str, Any]], field: str = "description") -> SafeString:
    """`text` made visible and escaped, each finding's excerpt on `field` marked where it occurs."""
    shown = html.escape(revealed(text))
    for finding in findings:
        if finding.get("field") != field:
            continue
        excerpt = str(finding.get("excerpt") or "").removeprefix("hidden: ").rstrip("…")
        needle = html.escape(excerpt)
        if needle and needle in shown:
            color = SEVERITY_CSS.get(str(finding.get("severity")), "#666")
            shown = shown.replace(needle, f'<mark title="{html.escape(str(finding.get("rule")))}" '
                                          f'style="outline:2px solid {color}">{needle}</mark>', 1)
    return mark_safe(shown)


def findings_html(findings: list[dict[str, Any]], new: set[tuple[str, str, str]] | None = None) -> SafeString:
    """The findings as a list: severity, rule, field, excerpt; those not in the approved definition marked new."""
    if not findings:
        return format_html("<span>{}</span>", "no findings")
    rows = ((SEVERITY_CSS.get(f.get("severity", ""), "#666"), f.get("severity", ""), f.get("rule", ""),
             f.get("field", ""), f.get("excerpt", ""),
             " NEW" if new is not None and (f.get("rule"), f.get("field"), f.get("excerpt")) in new else "")
            for f in findings)
    return format_html('<ul class="toolhub-findings">{}</ul>', format_html_join(
        "", '<li><b style="color:{}">{}</b> {} <small>({})</small>: <code>{}</code><b>{}</b></li>', rows))


def server_screen_html(tool: Tool) -> SafeString:
    """A server's instructions, prompts and resources as the model would read them, findings marked, held ones
    named, and who approved them."""
    data = tool.server_screen or {}
    findings = list(data.get("findings") or [])
    held = {rules.item_of(str(f.get("field"))) for f in findings if f.get("severity") == "high"}
    rows: list[SafeString] = []
    if data.get("instructions"):
        rows.append(format_html("<p><b>Instructions</b> <small>(passed to no model)</small></p>"
                                '<div style="white-space:pre-wrap">{}</div>',
                                highlighted(str(data["instructions"]), findings, "server.instructions")))
    for kind in ("prompts", "resources"):
        for item in data.get(kind) or []:
            name = str(item.get("name", ""))
            mark = format_html(' <b style="color:{}">held</b>', SEVERITY_CSS["high"]) \
                if (kind, name) in held and data.get("status") == "held" else ""
            rows.append(format_html("<p><b>{} {}</b>{}: {}</p>", kind[:-1], name, mark,
                                    highlighted(str(item.get("description") or ""), findings,
                                                f"{kind}.{name}.description")))
    approved = data.get("approved_by") or {}
    said = format_html("<p><small>Approved by {} at {}</small></p>", approved.get("username") or "-",
                       data.get("approved_at") or "-") if data.get("approved_at") else ""
    return format_html("<p>Status: <b>{}</b></p>{}{}{}", data.get("status") or "clear",
                       format_html_join("", "{}", ((r,) for r in rows)), findings_html(findings), said)


# The server texts module above the functions: held first, then flagged, then approved.
_STATUS_ORDER = {"held": 0, "flagged": 1, "approved": 2}


def screened_servers(request: HttpRequest) -> list[dict[str, Any]]:
    """The viewer's tools whose instructions, prompts or resources the screen found something in, held first; they
    are reviewed and approved on the tool's page (the "approve server texts" action)."""
    tools = (Tool.objects.filter(tenant__in=tenants_for_admin(user=request.user)).exclude(server_screen={})
             .select_related("tenant").only("id", "name", "tenant__slug", "server_screen"))
    rows = []
    for tool in tools:
        findings = list((tool.server_screen or {}).get("findings") or [])
        if not findings:
            continue
        levels = {f.get("severity") for f in findings}
        rows.append({"url": reverse("admin:tools_app_tool_change", args=[tool.pk]), "tool": tool.name,
                     "tenant": tool.tenant.slug, "status": tool.server_screen.get("status") or "clear",
                     "worst": next((s for s in ("high", "medium", "low") if s in levels), "-"),
                     "count": len(findings), "rules": ", ".join(sorted({str(f.get("rule")) for f in findings}))})
    return sorted(rows, key=lambda r: (_STATUS_ORDER.get(r["status"], 3), r["tool"]))


@admin.register(ScreenedFunction)
class ScreenedFunctionAdmin(ReadOnlyAdminMixin, _ScreenedAdmin):
    """Functions with findings, held first; the admin reviews them on the tool's page."""

    list_display = ["tool_link", "name", "screen_status", "worst", "count", "first_findings"]
    # The row opens from the function's name: the first column is already a link (to the tool), and a link inside
    # Django's row link is split by the browser into an empty one nobody can click.
    list_display_links = ["name"]
    list_filter = ["screen_status", "tool"]
    change_list_template = "admin/tools_app/screenedfunction/change_list.html"
    search_fields = ["name", "tool__name"]
    fields = readonly_fields = ("tool", "name", "screen_status", "screen_version", "description_visible",
                                "findings", "screen_approved_by", "screen_approved_at")

    def get_queryset(self, request: HttpRequest) -> QuerySet[ScreenedFunction]:
        return (super().get_queryset(request).select_related("tool", "tool__tenant")
                .filter(tool__tenant__in=tenants_for_admin(user=request.user))
                .exclude(screen_findings=[]).exclude(state=FunctionState.REMOVED).order_by("screen_status", "tool__name"))

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        # Server texts (instructions, prompts, resources) are held like functions: listed above them.
        return super().changelist_view(request, {**(extra_context or {}), "screened_servers": screened_servers(request)})

    @admin.display(description="Tool", ordering="tool__name")
    def tool_link(self, obj: ToolFunction) -> str:
        return format_html('<a href="{}">{}</a> <small>{}</small>', reverse("admin:tools_app_tool_change",
                                                                              args=[obj.tool_id]),
                           obj.tool.name, obj.tool.tenant.slug)

    @admin.display(description="Worst")
    def worst(self, obj: ToolFunction) -> str:
        levels = {f.get("severity") for f in obj.screen_findings or []}
        return next((s for s in ("high", "medium", "low") if s in levels), "-")

    @admin.display(description="Findings")
    def count(self, obj: ToolFunction) -> int:
        return len(obj.screen_findings or [])

    @admin.display(description="Rules")
    def first_findings(self, obj: ToolFunction) -> str:
        return ", ".join(sorted({str(f.get("rule")) for f in obj.screen_findings or []}))

    @admin.display(description="Description (as the model reads it; findings marked)")
    def description_visible(self, obj: ToolFunction) -> str:
        return format_html('<div style="white-space:pre-wrap">{}</div>',
                           highlighted(obj.description, obj.screen_findings or []))

    @admin.display(description="Findings")
    def findings(self, obj: ToolFunction) -> str:
        return findings_html(obj.screen_findings or [])
