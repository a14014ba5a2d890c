"""Admin for tenants and memberships; tenant admins see only their own tenants."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from tenants_app.admin_scoping import TenantRoleAdminMixin
from tenants_app.models import Membership, Tenant
from tenants_app.selectors import tenants_for_admin


class MembershipInline(TenantRoleAdminMixin, admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


@admin.register(Tenant)
class TenantAdmin(TenantRoleAdminMixin, admin.ModelAdmin):
    list_display = ["slug", "name", "is_active", "created_at"]
    search_fields = ["slug", "name"]
    list_filter = ["is_active"]
    inlines = [MembershipInline]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Tenant]:
        return tenants_for_admin(user=request.user)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.is_superuser)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return bool(request.user.is_superuser)


@admin.register(Membership)
class MembershipAdmin(TenantRoleAdminMixin, admin.ModelAdmin):
    list_display = ["user", "tenant", "role", "created_at"]
    list_filter = ["role", "tenant"]
    search_fields = ["user__username", "tenant__slug"]
    autocomplete_fields = ["user"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Membership]:
        return super().get_queryset(request).filter(tenant__in=tenants_for_admin(user=request.user))

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "tenant":
            kwargs["queryset"] = tenants_for_admin(user=request.user)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)
