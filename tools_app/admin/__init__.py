"""Tool admin: tenant-scoped, masked config summary, write-only config, actions through services."""

from __future__ import annotations

import json
import time
from typing import Any

from django.conf import settings
from django.contrib import admin, messages
from django.db.models import Case, Count, Q, QuerySet, Value, When
from django.http import HttpRequest
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html

from core.errors import DomainError
from tenants_app.admin_scoping import (
    ReadOnlyAdminMixin,
    ServiceAdminMixin,
    TenantRoleAdminMixin,
    person,
    tenant_filter,
)
from tenants_app.selectors import tenants_for_admin
from tools_app import selectors, services
from tools_app.admin.config_form import FORM_TYPES, config_fields
from tools_app.admin.forms import ToolAdminForm
from tools_app.admin.pages import (
    AWAITING,
    ToolPagesMixin,
    function_badge,
    history_of_refresh,
    history_of_test,
)
from tools_app.configs import mask_config
from tools_app.models import (
    Approval,
    ApprovalVia,
    FunctionState,
    Safety,
    ScreenStatus,
    Tool,
    ToolCall,
    ToolFunction,
    ToolStatus,
    ToolType,
)
from tools_app.services import discovery, screening
from tools_app.services.approval_gate import needs_approval
from tools_app.wiring.specs import runner_of
from tools_app.wiring.workspaces import workspace_for

# Generic in their model for the type checker (django_stubs_ext.monkeypatch() in the settings makes Django's
# classes subscriptable at run time too).
_ToolFunctionInline = admin.TabularInline[ToolFunction, Tool]
_ToolAdmin = admin.ModelAdmin[Tool]
_ToolFunctionAdmin = admin.ModelAdmin[ToolFunction]
_ToolCallAdmin = admin.ModelAdmin[ToolCall]

CONFIG_HELP = ("Fields marked * are required. Rows marked <b>secret</b> are write-only: a stored secret shows "
               "<code>********</code>, which keeps it; type a new value to replace it. Rows marked <b>shown</b> "
               "are plain values anyone managing this tool can read back.")


def function_approval(fn: ToolFunction) -> str:
    """When calls to the function wait for a person, in words (the same rule as the approvals service)."""
    if needs_approval(fn.tool, fn) and fn.safety == Safety.DESTRUCTIVE:
        return "always (destructive)"
    if fn.requires_approval:
        return "always"
    if fn.tool.requires_approval:
        return "always (the tool asks)"
    if needs_approval(fn.tool, fn):
        return "always (server marks it destructive)"
    return "no" if fn.requires_approval is False else "no (as the tool)"


class ToolFunctionInline(TenantRoleAdminMixin, _ToolFunctionInline):
    model = ToolFunction
    extra = 0
    can_delete = False
    fields = ["name", "badge", "approval", "short_description", "links"]
    readonly_fields = ["name", "badge", "approval", "short_description", "links"]
    verbose_name_plural = "Functions (what the server offers)"

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="State")
    def badge(self, obj: ToolFunction) -> str:
        return function_badge(obj)

    @admin.display(description="Asks approval")
    def approval(self, obj: ToolFunction) -> str:
        return function_approval(obj)

    @admin.display(description="Description")
    def short_description(self, obj: ToolFunction) -> str:
        # As the model reads it: invisible characters shown (⟨U+E0041⟩), the screen's findings marked in place.
        from tools_app.admin.screen import findings_html, highlighted

        text = obj.description or ""
        shown = highlighted(text if len(text) <= 400 else text[:397] + "...", obj.screen_findings or [])
        findings = [f for f in obj.screen_findings or [] if f.get("severity") != "low"]
        override = format_html("<br><small>Offered as: {}</small>", obj.description_override) \
            if obj.description_override else ""
        if not findings:
            return format_html("{}{}", shown, override)
        return format_html("{}{}<br><small>Screen: {}</small>{}", shown, override, obj.screen_status,
                           findings_html(findings))

    @admin.display(description="")
    def links(self, obj: ToolFunction) -> str:
        if obj.state in (FunctionState.CHANGED, FunctionState.HELD):
            return format_html('<a class="button" href="{}">Review change</a>',
                               reverse("admin:tools_app_tool_changes", args=[obj.tool_id]))
        if obj.state == FunctionState.REMOVED:
            return ""
        # The buttons belong to a form outside the tool's own form (HTML `form` attribute): no nesting.
        return format_html(
            '<a href="{}?function={}">Try</a> <button type="submit" form="toolhub-fn-form" name="toggle" '
            'value="{}:{}" class="toolhub-fn-toggle">{}</button>',
            reverse("admin:tools_app_tool_try", args=[obj.tool_id]), obj.name, obj.name,
            "0" if obj.enabled else "1", "Disable" if obj.enabled else "Enable")


RECENT_CALLS = 10
MAIN_FIELDS = ["tenant", "name", "description", "type", "status", "safety", "requires_approval"]
HEALTH_FIELDS = ["health", "config_version", "consecutive_failures", "disabled_until", "last_ok_at", "last_error",
                 "last_checked_at", "protocol_version"]


@admin.register(Tool)
class ToolAdmin(ToolPagesMixin, ServiceAdminMixin, _ToolAdmin):
    form = ToolAdminForm
    change_form_template = "admin/tools_app/tool/change_form.html"
    list_display = ["name", "tenant", "type", "status", "safety", "health", "awaiting"]
    list_select_related = ["tenant"]
    ordering = ["name", "id"]
    list_filter = [tenant_filter(), "type", "status", "safety"]
    search_fields = ["name", "description"]
    readonly_fields = [*HEALTH_FIELDS, "builtin_name", "config_summary", "sandbox", "package", "market_origin",
                       "server_screen_view"]
    inlines = [ToolFunctionInline]
    actions = ["enable_tools", "disable_tools", "test_tools", "refresh_functions", "approve_changed_functions",
               "approve_server_texts"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Tool]:
        qs: QuerySet[Tool] = super().get_queryset(request).filter(tenant__in=tenants_for_admin(user=request.user)).annotate(
            awaiting_count=Count("functions", filter=Q(functions__state__in=AWAITING)))
        return qs

    def get_ordering(self, request: HttpRequest) -> Any:
        # The tenant's own MCP and HTTP tools first: a dozen built-ins would otherwise bury them.
        # An expression, not an annotation: related filters (tool calls "by tool") order tools with this too.
        return [Case(When(type=ToolType.BUILTIN, then=Value(1)), default=Value(0)).asc(), "name", "id"]

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "tenant":
            kwargs["queryset"] = tenants_for_admin(user=request.user)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        fields = list(self.readonly_fields)
        if obj is not None:
            fields += ["tenant", "type"]
        return fields

    def get_inlines(self, request: HttpRequest, obj: Any = None) -> Any:
        return self.inlines if obj is not None else []  # a new tool has no functions until discovered

    def get_fieldsets(self, request: HttpRequest, obj: Any = None) -> Any:
        main = [*MAIN_FIELDS, "market_origin"] if obj is not None and obj.market_entry_id else MAIN_FIELDS
        fieldsets: list[Any] = [(None, {"fields": main})]
        if obj is not None and obj.type == ToolType.BUILTIN:
            fieldsets.append(("Built-in", {"fields": ["builtin_name"],
                                           "description": "Configured by the built-in registry: nothing to edit."}))
        else:
            for tool_type in ([obj.type] if obj is not None else FORM_TYPES):
                fieldsets.append((f"{ToolType(tool_type).label} config", {
                    "fields": list(config_fields(tool_type)),
                    "classes": ["toolhub-config", f"toolhub-config-{tool_type}"],
                    "description": CONFIG_HELP,
                }))
            fieldsets.append(("Advanced", {"fields": ["config_advanced", "config_json"],
                                           "classes": ["toolhub-advanced"]}))
        if obj is None or obj.type == ToolType.LOCAL:
            # Only platform operators may take a server out of the tenant sandbox; everyone sees where it runs.
            fields = (["unsandboxed"] if request.user.is_superuser else []) + (["sandbox", "package"] if obj is not None else [])
            if fields:
                fieldsets.append(("Sandbox (LOCAL)", {"fields": fields,
                                                      "classes": ["toolhub-config", "toolhub-config-LOCAL"]}))
        if obj is not None and obj.type in (ToolType.LOCAL, ToolType.REMOTE) and (obj.server_screen or {}).get("key"):
            fieldsets.append(("What the server tells models besides its tools", {
                "fields": ["server_screen_view"],
                "description": "Its instructions (passed to no model), prompts and resources, as the model would "
                               "read them, with the screen's findings. A held prompt or resource is not offered to "
                               "gateway clients until approved (action: Approve the server's instructions, "
                               "prompts and resources)."}))
        if obj is not None:
            fieldsets.append(("Health", {"fields": HEALTH_FIELDS}))
        return fieldsets

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any) -> Any:
        form = super().get_form(request, obj, change, **kwargs)
        if "unsandboxed" in form.base_fields:
            form.base_fields["unsandboxed"].help_text = (
                "Run this server as Toolhub's own user, outside the tenant sandbox: it can then read Toolhub's "
                "environment, files and every tenant's data. Only for servers you, the operator, trust.")
        return form

    @admin.display(description="Package")
    def package(self, obj: Tool) -> str:
        from tools_app.packages.services import package_view

        view = package_view(obj)
        if view is None:
            return "Not run from a package: the command runs as written."
        error = view["error"]
        return format_html(
            "{} package {} {}: <strong class=\"toolhub-package-{}\">{}</strong>{}{}",
            view["manager"], view["name"], view["version"] or view["requested"], view["status"], view["status"],
            f" ({view['size'] / 1e6:.1f} MB in the store, read-only to the server)" if view["size"] else "",
            f": {error['code']}: {error['message']}" if error else "")

    @admin.display(description="Where it runs")
    def sandbox(self, obj: Tool) -> str:
        if obj.unsandboxed:
            return format_html('<strong class="toolhub-unsandboxed" style="color: #ba2121">{}</strong>',
                               "UNSANDBOXED: runs as Toolhub's own user, with its files, environment and network")
        network = {"host": "THE HOST'S NETWORK (loopback, Redis, PostgreSQL, runners, private ranges)",
                   "public": "the internet only (no loopback, host, private or metadata addresses)"}.get(
            obj.tenant.local_network, "no network")
        runner = runner_of(obj)
        where = (f"on runner {runner.id} (up since {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(runner.since))})"
                 if runner is not None else "in each web process" if not settings.TOOLHUB_RUNNERS
                 else "on no runner: none is live")
        return format_html("In the tenant sandbox: uid {}, the workspace {} as its only writable folder, {}; {}",
                           settings.TOOLHUB_LOCAL_SANDBOX_UID_BASE + obj.tenant_id,
                           workspace_for(obj.tenant), network, where)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if obj is not None and obj.type == ToolType.BUILTIN:
            return False
        return super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if obj is not None and obj.type == ToolType.BUILTIN:
            return False
        return super().has_delete_permission(request, obj)

    def render_change_form(self, request: HttpRequest, context: dict[str, Any], add: bool = False,
                           change: bool = False, form_url: str = "", obj: Any = None) -> Any:
        if obj is not None:
            context["awaiting"] = obj.functions.filter(state__in=AWAITING).count()
            context["function_count"] = obj.functions.count()
            context["discovers"] = obj.type in (ToolType.LOCAL, ToolType.REMOTE, ToolType.HTTP)
            # Functions are discovered in the background after a save: still on its way, or failed (and why).
            checked = obj.last_checked_at
            context["discovery"] = ("pending" if checked is None or checked < obj.updated_at
                                    else "failed" if obj.last_error else "empty")
            context["recent_calls"] = list(ToolCall.objects.filter(tenant=obj.tenant, tool=obj)
                                           .order_by("-created_at", "-id")[:RECENT_CALLS])
            context["tool_enabled"] = obj.status == ToolStatus.ENABLED
            context["oauth"] = selectors.oauth_state(tenant=obj.tenant, tool=obj, user=request.user)
            entry = obj.market_entry
            context["market_update"] = entry is not None and entry.content_hash != obj.market_hash \
                and entry.status != "removed"
        return super().render_change_form(request, context, add, change, form_url, obj)

    @admin.display(description="Screen")
    def server_screen_view(self, obj: Tool) -> str:
        from tools_app.admin.screen import server_screen_html

        return server_screen_html(obj)

    @admin.display(description="From the market")
    def market_origin(self, obj: Tool) -> str:
        entry = obj.market_entry
        if entry is None:
            return "-"
        state = "up to date" if entry.content_hash == obj.market_hash else "a newer version is available"
        return format_html('<a href="{}" id="toolhub-market-entry">{}</a> ({}, {})',
                           reverse("admin:market_app_marketentry_change", args=[entry.pk]), entry.title or entry.name,
                           entry.source.name, state)

    @admin.display(description="Config (masked)")
    def config_summary(self, obj: Tool) -> str:
        return format_html("<pre>{}</pre>", json.dumps(mask_config(obj.type, obj.config), indent=2))

    @admin.display(description="Health")
    def health(self, obj: Tool) -> str:
        """The dashboard's badges: ok, failing, paused by the breaker (minutes left), never checked."""
        if obj.type not in (ToolType.LOCAL, ToolType.REMOTE):
            return format_html('<span class="toolhub-badge muted" title="{}">no check</span>',
                               "Built-in and HTTP tools have no health check")
        last_ok = f"last OK {obj.last_ok_at:%Y-%m-%d %H:%M} UTC" if obj.last_ok_at else "never OK"
        detail = f"{last_ok}; {obj.last_error}" if obj.last_error else last_ok
        if obj.in_failure_window and obj.disabled_until is not None:
            minutes = max(1, round((obj.disabled_until - timezone.now()).total_seconds() / 60))
            return format_html('<span class="toolhub-badge bad" title="{}">paused · {} min left</span>', detail, minutes)
        if obj.consecutive_failures:
            return format_html('<span class="toolhub-badge warn" title="{}">{} failure{}</span>', detail,
                               obj.consecutive_failures, "" if obj.consecutive_failures == 1 else "s")
        if obj.last_ok_at:
            return format_html('<span class="toolhub-badge ok" title="{}">ok</span>', detail)
        return format_html('<span class="toolhub-badge muted" title="{}">never checked</span>', detail)

    @admin.display(description="Changes", ordering="awaiting_count")
    def awaiting(self, obj: Tool) -> str:
        count = getattr(obj, "awaiting_count", 0)
        return format_html('<span class="toolhub-badge warn" title="{} function(s) new or changed, awaiting approval">'
                           '{} to review</span>', count, count) if count else ""

    def save_model(self, request: HttpRequest, obj: Tool, form: Any, change: bool) -> None:
        data = services.ToolInput(
            name=form.cleaned_data["name"],
            description=form.cleaned_data.get("description", ""),
            type=None if change else form.cleaned_data["type"],
            status=form.cleaned_data.get("status"),
            config=form.cleaned_data.get("config_value", services.KEEP),
            safety=form.cleaned_data.get("safety"),
            requires_approval=form.cleaned_data.get("requires_approval"),
            unsandboxed=form.cleaned_data.get("unsandboxed"),
        )
        if change:
            saved = self.call_service(request, services.tool_update, tenant=obj.tenant, tool_id=obj.pk, changes=data)
        else:
            saved = self.call_service(request, services.tool_create, tenant=form.cleaned_data["tenant"], data=data)
        obj.pk = saved.pk
        obj.refresh_from_db()

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        # The functions inline is read-only, so saving its formsets writes nothing; form has no m2m.
        for formset in formsets:
            formset.save()

    def _set_status(self, request: HttpRequest, queryset: QuerySet[Tool], status: str) -> None:
        done, failed = 0, []
        for tool in queryset:
            try:
                services.tool_set_status(tenant=tool.tenant, actor=request.user, tool_id=tool.pk, status=status)
                done += 1
            except DomainError as exc:
                failed.append(f"{tool.name}: {exc.message}")
            else:
                self._history(request, tool, f"{'Enabled' if status == ToolStatus.ENABLED else 'Disabled'} the tool.")
        self.message_user(request, f"{done} tool(s) set to {status}.")
        for line in failed:
            self.message_user(request, line, messages.ERROR)

    @admin.action(description="Enable selected tools")
    def enable_tools(self, request: HttpRequest, queryset: QuerySet[Tool]) -> None:
        self._set_status(request, queryset, ToolStatus.ENABLED)

    @admin.action(description="Disable selected tools")
    def disable_tools(self, request: HttpRequest, queryset: QuerySet[Tool]) -> None:
        self._set_status(request, queryset, ToolStatus.DISABLED)


    @admin.action(description="Test (connect for real: initialize + tools/list)")
    def test_tools(self, request: HttpRequest, queryset: QuerySet[Tool]) -> None:
        for tool in queryset:
            body = discovery.tool_test(tenant=tool.tenant, actor=request.user, tool_id=tool.pk)
            self._history(request, tool, history_of_test(body))
            if body["ok"]:
                names = ", ".join(f["name"] for f in body["functions"][:10])
                self.message_user(request, f"{tool.name}: OK in {body['latency_ms']} ms, "
                                           f"{body['tool_count']} function(s): {names}; changes {body['changes']}")
            else:
                self.message_user(request, f"{tool.name}: {body['error']['code']}: {body['error']['message']}",
                                  messages.ERROR)

    @admin.action(description="Refresh functions (store what the server offers now)")
    def refresh_functions(self, request: HttpRequest, queryset: QuerySet[Tool]) -> None:
        for tool in queryset:
            body = discovery.tool_refresh(tenant=tool.tenant, actor=request.user, tool_id=tool.pk)
            self._history(request, tool, history_of_refresh(body))
            if body["ok"]:
                self.message_user(request, f"{tool.name}: {body['tool_count']} function(s); changes {body['changes']}")
            else:
                self.message_user(request, f"{tool.name}: {body['error']['message']}", messages.ERROR)

    @admin.action(description="Approve changed functions")
    def approve_changed_functions(self, request: HttpRequest, queryset: QuerySet[Tool]) -> None:
        """Drift only: a function the screen holds (a high finding, whether new or drifted) is skipped and named;
        it needs its own approval on the tool's Review page, which records who approved which definition."""
        awaiting = ToolFunction.objects.filter(tool__in=queryset, state__in=AWAITING).select_related("tool")
        for fn in awaiting.order_by("tool__name", "name"):
            if fn.screen_status == ScreenStatus.HELD:
                self.message_user(request, f"not approved {fn.tool.name}.{fn.name}: held by the screen; review its "
                                           "findings and approve it on the tool's Review changes page",
                                  messages.WARNING)
                continue
            discovery.function_approve(tenant=fn.tool.tenant, actor=request.user, tool_id=fn.tool_id, name=fn.name)
            self._history(request, fn.tool, f"Approved function {fn.name}.")
            self.message_user(request, f"approved {fn.tool.name}.{fn.name}")


    @admin.action(description="Approve the server's instructions, prompts and resources (screen)")
    def approve_server_texts(self, request: HttpRequest, queryset: QuerySet[Tool]) -> None:
        """An explicit approval of what the selected servers say besides their tools, recording who and which
        texts; their functions are approved one by one."""
        for tool in queryset:
            status = (tool.server_screen or {}).get("status")
            if status not in (ScreenStatus.HELD, ScreenStatus.FLAGGED):
                self.message_user(request, f"{tool.name}: nothing held or flagged in its server texts")
                continue
            screening.approve_server(tool, actor=request.user)
            key = str((tool.server_screen or {}).get("key", ""))[:12]
            self._history(request, tool, f"Approved the server's instructions, prompts and resources ({key}).")
            self.message_user(request, f"approved {tool.name}'s instructions, prompts and resources")


FUNCTION_FIELDS = ["tool", "name", "description", "input_schema", "output_schema", "annotations", "schema_hash",
                   "approved_hash", "badge", "requires_approval", "safety", "safety_override", "unsupported_reason"]


@admin.register(ToolFunction)
class ToolFunctionAdmin(TenantRoleAdminMixin, _ToolFunctionAdmin):
    list_display = ["function_ref", "badge", "asks_approval", "safety"]
    list_display_links = ["function_ref"]
    list_select_related = ["tool"]
    list_filter = ["state", "enabled", tenant_filter("tool__tenant")]
    search_fields = ["name", "tool__name"]
    fields = readonly_fields = FUNCTION_FIELDS  # type: ignore[assignment]
    actions = ["approve", "safety_read_only", "safety_write", "safety_destructive", "safety_from_annotations"]

    @admin.display(description="State")
    def badge(self, obj: ToolFunction) -> str:
        return function_badge(obj)

    @admin.display(description="Function", ordering="name")
    def function_ref(self, obj: ToolFunction) -> str:
        return format_html("{}<br><small>of {}</small>", obj.name, obj.tool.name)

    @admin.display(description="Asks approval", ordering="requires_approval")
    def asks_approval(self, obj: ToolFunction) -> str:
        return function_approval(obj)

    @admin.display(description="Safety")
    def safety(self, obj: ToolFunction) -> str:
        # The effective safety; an admin's override says so (the change page shows the annotations).
        return f"{obj.safety} (override)" if obj.safety_override else obj.safety

    def _set_safety(self, request: HttpRequest, queryset: QuerySet[ToolFunction], safety: str) -> None:
        for fn in queryset.select_related("tool"):
            try:
                discovery.function_update(tenant=fn.tool.tenant, actor=request.user, tool_id=fn.tool_id, name=fn.name,
                                          enabled=None, requires_approval=..., safety=safety)
            except DomainError as exc:
                self.message_user(request, f"{fn.name}: {exc.message}", messages.ERROR)
            else:
                self.log_change(request, fn, f"Safety set to {safety}." if safety
                                else "Safety from the server's annotations (override cleared).")

    @admin.action(description="Override safety: READ_ONLY")
    def safety_read_only(self, request: HttpRequest, queryset: QuerySet[ToolFunction]) -> None:
        self._set_safety(request, queryset, "READ_ONLY")

    @admin.action(description="Override safety: WRITE")
    def safety_write(self, request: HttpRequest, queryset: QuerySet[ToolFunction]) -> None:
        self._set_safety(request, queryset, "WRITE")

    @admin.action(description="Override safety: DESTRUCTIVE (needs approval)")
    def safety_destructive(self, request: HttpRequest, queryset: QuerySet[ToolFunction]) -> None:
        self._set_safety(request, queryset, "DESTRUCTIVE")

    @admin.action(description="Safety from the server's annotations (clear the override)")
    def safety_from_annotations(self, request: HttpRequest, queryset: QuerySet[ToolFunction]) -> None:
        self._set_safety(request, queryset, "")

    def get_queryset(self, request: HttpRequest) -> QuerySet[ToolFunction]:
        return super().get_queryset(request).filter(tool__tenant__in=tenants_for_admin(user=request.user))

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.action(description="Approve the current definition")
    def approve(self, request: HttpRequest, queryset: QuerySet[ToolFunction]) -> None:
        for fn in queryset.select_related("tool"):
            try:
                discovery.function_approve(tenant=fn.tool.tenant, actor=request.user, tool_id=fn.tool_id, name=fn.name)
            except DomainError as exc:
                self.message_user(request, f"{fn.name}: {exc.message}", messages.ERROR)
            else:
                self.log_change(request, fn, "Approved the current definition.")


class ViaFilter(admin.SimpleListFilter):
    """Where a call came from: an agent's chat, a direct invoke (API or the admin's Try), the MCP gateway."""

    title = "via"
    parameter_name = "via"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return list(ApprovalVia.choices)

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        return queryset.filter(via=value) if value else queryset


@admin.register(ToolCall)
class ToolCallAdmin(ReadOnlyAdminMixin, _ToolCallAdmin):
    # Four columns that fit beside the filters at 1280 px: when, which call, how it ended, where it came from.
    list_display = ["created_at", "tenant", "call", "outcome", "origin"]
    list_filter = [tenant_filter(), "status", "tool", "agent", ViaFilter, "created_at"]
    list_select_related = ["tenant", "agent", "actor"]
    search_fields = ["tool_name", "function"]
    # The call's page: what ran and how it ended first, then where it came from (with its approval), then the data.
    fields = readonly_fields = [  # type: ignore[assignment]
        "created_at", "tool", "tool_name", "function", "title", "status", "error_code", "error", "cost_ms",
        "approval_link", "via", "actor_name", "agent", "conversation", "dry_run", "arguments", "result_excerpt",
        "result_size", "result_content", "server_logs", "call_uid"]

    actor_name = person("actor", "Actor")

    def get_queryset(self, request: HttpRequest) -> QuerySet[ToolCall]:
        return super().get_queryset(request).filter(tenant__in=tenants_for_admin(user=request.user))

    @admin.display(description="Approval")
    def approval_link(self, obj: ToolCall) -> str:
        """The approval this call waited for (the request) or ran after (the result); "-" for neither."""
        held = Approval.objects.filter(tenant=obj.tenant_id, tool_call=obj).first()
        if held is not None:
            return format_html('<a href="{}" id="toolhub-approval">approval #{}</a> ({}): this row is the request',
                               reverse("admin:tools_app_approval_change", args=[held.pk]), held.pk,
                               held.get_status_display().lower())
        ran = Approval.objects.filter(tenant=obj.tenant_id, result_call=obj).first()
        if ran is not None:
            return format_html('ran once <a href="{}" id="toolhub-approval">approval #{}</a> was approved by {}',
                               reverse("admin:tools_app_approval_change", args=[ran.pk]), ran.pk, ran.decided_by)
        return "-"

    @admin.display(description="Call", ordering="tool_name")
    def call(self, obj: ToolCall) -> str:
        return format_html("{}<br><small>{}</small>", obj.tool_name, obj.function)

    @admin.display(description="Result", ordering="status")
    def outcome(self, obj: ToolCall) -> str:
        css = {"ok": "ok", "error": "bad", "denied": "bad", "awaiting_approval": "warn"}.get(obj.status, "muted")
        return format_html('<span class="toolhub-badge {}">{}</span> {}<br><small>{} ms</small>', css,
                           obj.get_status_display(), obj.error_code, obj.cost_ms)

    @admin.display(description="Via", ordering="via")
    def origin(self, obj: ToolCall) -> str:
        via = obj.via_label()
        if obj.client:  # through the gateway with an OAuth token: the client it was issued to
            via = f"{via} ({obj.client})"
        who = " · ".join(str(x) for x in (obj.agent, obj.actor) if x is not None)
        return format_html("{}<br><small>{}</small>", via, who)


# Each registers its own pages: "Quotas" and the usage page, "Refused calls", "Screen findings".
from tools_app.admin import quotas as _quotas  # noqa: E402, F401
from tools_app.admin import refused as _refused  # noqa: E402,F401
from tools_app.admin import screen as _screen  # noqa: E402,F401
