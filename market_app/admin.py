"""Market admin: tenant-scoped sources with write-only auth headers and a Refresh action; entries with Load."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import Q, QuerySet
from django.http import HttpRequest

from core.errors import DomainError
from core.secrets import KEEP, MASK
from market_app import services
from market_app.models import MarketEntry, MarketSource
from tenants_app.admin_scoping import ReadOnlyAdminMixin, ServiceAdminMixin
from tenants_app.models import Role, Tenant
from tenants_app.selectors import memberships_for_user, tenants_for_admin


def _visible(request: HttpRequest, prefix: str = "") -> Q:
    return Q(**{f"{prefix}tenant__in": tenants_for_admin(user=request.user)}) | Q(**{f"{prefix}tenant__isnull": True})


def counts_line(counts: dict[str, Any]) -> str:
    line = ", ".join(f"{k} {counts.get(k, 0)}" for k in ("added", "updated", "unchanged", "removed"))
    return f"{line}, errors {counts.get('errors_total', len(counts.get('errors', [])))}"


class SourceAdminForm(forms.ModelForm):
    """`auth_headers` is write-only: the field starts blank and blank keeps the stored headers."""

    auth_headers_input = forms.CharField(
        label="Auth headers (JSON)",
        required=False,
        widget=forms.Textarea(attrs={"rows": 4, "cols": 80, "autocomplete": "off"}),
        help_text='Write-only. Blank keeps the stored headers; {"Authorization": "Bearer ..."} replaces them; '
                  '"********" keeps a stored value; null clears.',
    )

    class Meta:
        model = MarketSource
        fields = ["tenant", "name", "url", "format", "enabled", "refresh_interval_min"]

    def clean_auth_headers_input(self) -> Any:
        raw = self.cleaned_data.get("auth_headers_input", "").strip()
        if not raw:
            return KEEP
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as exc:
            # The position, never the text: it is a secret.
            raise forms.ValidationError(f"not valid JSON: {exc.msg} at line {exc.lineno}") from None
        if value is not None and not isinstance(value, dict):
            raise forms.ValidationError("auth headers must be a JSON object or null")
        return value


@admin.register(MarketSource)
class MarketSourceAdmin(ServiceAdminMixin, admin.ModelAdmin):
    form = SourceAdminForm
    list_display = ["name", "scope", "url", "format", "enabled", "last_refresh_at", "last_status", "last_result"]
    list_filter = ["enabled", "format", "last_status"]
    search_fields = ["name", "url"]
    readonly_fields = ["auth_headers_keys", "cursor", "last_refresh_at", "last_status", "last_result",
                       "last_error", "refreshing_until"]
    actions = ["refresh_sources"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[MarketSource]:
        return super().get_queryset(request).filter(_visible(request)).select_related("tenant")

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "tenant":
            kwargs["queryset"] = tenants_for_admin(user=request.user)
            kwargs["required"] = not request.user.is_superuser  # type: ignore[union-attr]
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return [*self.readonly_fields, *(["tenant"] if obj is not None else [])]

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if obj is not None and obj.tenant_id is None and not request.user.is_superuser:  # type: ignore[union-attr]
            return False
        return super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if obj is not None and obj.tenant_id is None and not request.user.is_superuser:  # type: ignore[union-attr]
            return False
        return super().has_delete_permission(request, obj)

    @admin.display(description="Scope")
    def scope(self, obj: MarketSource) -> str:
        return "global" if obj.tenant_id is None else str(obj.tenant)

    @admin.display(description="Auth headers (write-only)")
    def auth_headers_keys(self, obj: MarketSource) -> str:
        return ", ".join(f"{k}: {MASK}" for k in (obj.auth_headers or {})) or "(none)"

    @admin.display(description="Last result")
    def last_result(self, obj: MarketSource) -> str:
        if obj.last_status == "error":
            return f"error: {obj.last_error}"
        return counts_line(obj.last_counts) if obj.last_counts else "-"

    def save_model(self, request: HttpRequest, obj: MarketSource, form: Any, change: bool) -> None:
        data = services.SourceInput(
            name=form.cleaned_data["name"], url=form.cleaned_data["url"], format=form.cleaned_data["format"],
            enabled=form.cleaned_data["enabled"], refresh_interval_min=form.cleaned_data["refresh_interval_min"],
            auth_headers=form.cleaned_data["auth_headers_input"],
        )
        if change:
            saved = self.call_service(request, services.source_update, tenant=obj.tenant, source_id=obj.pk,
                                      changes=data)
        else:
            tenant: Tenant | None = form.cleaned_data.get("tenant")
            data.is_global = tenant is None
            saved = self.call_service(request, services.source_create, tenant=tenant, data=data)
        obj.pk = saved.pk
        obj.refresh_from_db()

    def delete_model(self, request: HttpRequest, obj: MarketSource) -> None:
        services.source_delete(tenant=obj.tenant, actor=request.user, source_id=obj.pk)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[MarketSource]) -> None:
        for source in queryset:
            self.delete_model(request, source)

    @admin.action(description="Refresh selected sources now")
    def refresh_sources(self, request: HttpRequest, queryset: QuerySet[MarketSource]) -> None:
        for source in queryset:
            try:
                counts = services.source_refresh(source_id=source.pk, tenant=source.tenant, actor=request.user)
            except DomainError as exc:
                self.message_user(request, f"{source.name}: {exc.message}", messages.ERROR)
                continue
            level = messages.WARNING if counts["errors_total"] else messages.SUCCESS
            self.message_user(request, f"{source.name}: {counts_line(counts)}", level)


def target_tenant(user: Any, entry: MarketEntry) -> Tenant | None:
    """Where the admin's Load goes: the entry source's tenant, else the user's first owner/admin tenant."""
    if entry.source.tenant_id is not None:
        return entry.source.tenant
    membership = memberships_for_user(user=user).filter(role__in=[Role.OWNER, Role.ADMIN]).order_by(
        "tenant__slug").first()
    return membership.tenant if membership else None


@admin.register(MarketEntry)
class MarketEntryAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["name", "source", "kind", "status", "version", "is_shell_command", "updated_at"]
    # Related-only: the source filter offers the sources of visible entries, never other tenants' names.
    list_filter = [("source", admin.RelatedOnlyFieldListFilter), "kind", "status", "is_shell_command"]
    search_fields = ["name", "title", "description"]
    readonly_fields = [f.name for f in MarketEntry._meta.fields]
    actions = ["load_into_tenant"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[MarketEntry]:
        return super().get_queryset(request).filter(_visible(request, "source__")).select_related("source")

    @admin.action(description="Load into my tenant")
    def load_into_tenant(self, request: HttpRequest, queryset: QuerySet[MarketEntry]) -> None:
        for entry in queryset:
            tenant = target_tenant(request.user, entry)
            if tenant is None:
                self.message_user(request, f"{entry.name}: you are owner or admin of no tenant", messages.ERROR)
                continue
            try:
                loaded = services.entry_load(tenant=tenant, actor=request.user, entry_id=entry.pk)
            except DomainError as exc:
                self.message_user(request, f"{entry.name}: {exc.message}", messages.ERROR)
                continue
            note = f" {loaded.message}" if loaded.message else ""
            self.message_user(
                request, f"{entry.name}: loaded into {tenant.slug} as tool {loaded.tool.name!r}.{note}",
                messages.WARNING if loaded.message else messages.SUCCESS,
            )
