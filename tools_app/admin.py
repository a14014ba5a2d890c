"""Tool admin: tenant-scoped, masked config summary, write-only config, actions through services."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html

from core.errors import DomainError
from tenants_app.admin_scoping import (
    ReadOnlyAdminMixin,
    ServiceAdminMixin,
    TenantRoleAdminMixin,
    tenant_filter,
)
from tenants_app.selectors import tenants_for_admin
from tools_app import services
from tools_app.configs import mask_config
from tools_app.models import FunctionState, Tool, ToolCall, ToolFunction, ToolStatus, ToolType
from tools_app.services import discovery


class ToolAdminForm(forms.ModelForm):
    """`config` is write-only: the field starts blank and blank keeps the stored value."""

    config_input = forms.CharField(
        label="Config (JSON)",
        required=False,
        widget=forms.Textarea(attrs={"rows": 8, "cols": 80, "autocomplete": "off"}),
        help_text='Write-only. Leave blank to keep the stored config; "********" keeps a stored secret value.',
    )

    class Meta:
        model = Tool
        fields = ["tenant", "name", "description", "type", "status", "safety", "requires_approval"]

    def clean_config_input(self) -> Any:
        raw = self.cleaned_data.get("config_input", "").strip()
        if not raw:
            return services.KEEP
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(f"config is not valid JSON: {exc.msg} at line {exc.lineno}") from None
        if not isinstance(value, dict):
            raise forms.ValidationError("config must be a JSON object")
        return value


class ToolFunctionInline(TenantRoleAdminMixin, admin.TabularInline):
    model = ToolFunction
    extra = 0
    can_delete = False
    fields = ["name", "state", "enabled", "requires_approval", "description", "schema_hash"]
    readonly_fields = ["name", "state", "enabled", "requires_approval", "description", "schema_hash"]

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Tool)
class ToolAdmin(ServiceAdminMixin, admin.ModelAdmin):
    form = ToolAdminForm
    list_display = ["name", "tenant", "type", "status", "safety", "health", "last_ok_at", "disabled_until"]
    list_filter = [tenant_filter(), "type", "status", "safety"]
    search_fields = ["name", "description"]
    readonly_fields = ["config_summary", "config_version", "consecutive_failures", "disabled_until", "last_ok_at",
                       "last_error", "last_checked_at", "builtin_name"]
    inlines = [ToolFunctionInline]
    actions = ["enable_tools", "disable_tools", "test_tools", "refresh_functions", "approve_changed_functions"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Tool]:
        return super().get_queryset(request).filter(tenant__in=tenants_for_admin(user=request.user))

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "tenant":
            kwargs["queryset"] = tenants_for_admin(user=request.user)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        fields = list(self.readonly_fields)
        if obj is not None:
            fields += ["tenant", "type"]
        return fields

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if obj is not None and obj.type == ToolType.BUILTIN:
            return False
        return super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if obj is not None and obj.type == ToolType.BUILTIN:
            return False
        return super().has_delete_permission(request, obj)

    @admin.display(description="Config (masked)")
    def config_summary(self, obj: Tool) -> str:
        return format_html("<pre>{}</pre>", json.dumps(mask_config(obj.type, obj.config), indent=2))

    @admin.display(description="Health")
    def health(self, obj: Tool) -> str:
        if obj.in_failure_window:
            return f"breaker open ({obj.consecutive_failures} failures)"
        if obj.consecutive_failures:
            return f"{obj.consecutive_failures} failure(s)"
        return "ok" if obj.last_ok_at else "unchecked"

    def save_model(self, request: HttpRequest, obj: Tool, form: Any, change: bool) -> None:
        data = services.ToolInput(
            name=form.cleaned_data["name"],
            description=form.cleaned_data.get("description", ""),
            type=None if change else form.cleaned_data["type"],
            status=form.cleaned_data.get("status"),
            config=form.cleaned_data["config_input"],
            safety=form.cleaned_data.get("safety"),
            requires_approval=form.cleaned_data.get("requires_approval"),
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
            if body["ok"]:
                self.message_user(request, f"{tool.name}: {body['tool_count']} function(s); changes {body['changes']}")
            else:
                self.message_user(request, f"{tool.name}: {body['error']['message']}", messages.ERROR)

    @admin.action(description="Approve changed functions")
    def approve_changed_functions(self, request: HttpRequest, queryset: QuerySet[Tool]) -> None:
        for fn in ToolFunction.objects.filter(tool__in=queryset, state=FunctionState.CHANGED).select_related("tool"):
            discovery.function_approve(tenant=fn.tool.tenant, actor=request.user, tool_id=fn.tool_id, name=fn.name)
            self.message_user(request, f"approved {fn.tool.name}.{fn.name}")


@admin.register(ToolFunction)
class ToolFunctionAdmin(TenantRoleAdminMixin, admin.ModelAdmin):
    list_display = ["name", "tool", "state", "enabled", "requires_approval", "safety", "safety_override",
                    "unsupported_reason", "updated_at"]
    list_filter = ["state", "enabled", tenant_filter("tool__tenant")]
    search_fields = ["name", "tool__name"]
    readonly_fields = ["tool", "name", "description", "input_schema", "output_schema", "annotations", "schema_hash",
                       "approved_hash", "state", "enabled", "requires_approval", "safety", "safety_override",
                       "unsupported_reason"]
    actions = ["approve", "safety_read_only", "safety_write", "safety_destructive", "safety_from_annotations"]

    @admin.display(description="Safety (effective)")
    def safety(self, obj: ToolFunction) -> str:
        return obj.safety

    def _set_safety(self, request: HttpRequest, queryset: QuerySet[ToolFunction], safety: str) -> None:
        for fn in queryset.select_related("tool"):
            try:
                discovery.function_update(tenant=fn.tool.tenant, actor=request.user, tool_id=fn.tool_id, name=fn.name,
                                          enabled=None, requires_approval=..., safety=safety)
            except DomainError as exc:
                self.message_user(request, f"{fn.name}: {exc.message}", messages.ERROR)

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


@admin.register(ToolCall)
class ToolCallAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["created_at", "tenant", "tool_name", "function", "status", "error_code", "cost_ms", "actor"]
    list_filter = [tenant_filter(), "status"]
    search_fields = ["tool_name", "function"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[ToolCall]:
        return super().get_queryset(request).filter(tenant__in=tenants_for_admin(user=request.user))
