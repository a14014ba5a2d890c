"""Admin access by tenant role: owners and admins of a tenant manage its objects in the admin site.

Django's model permissions are not used for tenant staff: the membership role decides, and every
queryset is filtered to the tenants the user manages (superusers see everything).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect

from core.errors import DomainError
from tenants_app.selectors import tenants_for_admin


def manages_any_tenant(request: HttpRequest) -> bool:
    user = request.user
    if not (user.is_active and user.is_staff):
        return False
    return bool(user.is_superuser) or tenants_for_admin(user=user).exists()


class TenantRoleAdminMixin:
    """Grants view/add/change/delete to tenant owners/admins; querysets must still be tenant-filtered."""

    def has_module_permission(self, request: HttpRequest) -> bool:
        return manages_any_tenant(request)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return manages_any_tenant(request)

    def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:
        return manages_any_tenant(request)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return manages_any_tenant(request)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return manages_any_tenant(request)


class AdminAbort(Exception):
    """Raised inside save/delete hooks after a service refused; the change view rolls back and reloads."""


class ServiceAdminMixin(TenantRoleAdminMixin):
    """Admins that write through services: a DomainError becomes an error message, never a 500."""

    def call_service(self, request: HttpRequest, fn: Callable[..., Any], /, **kwargs: Any) -> Any:
        try:
            return fn(actor=request.user, **kwargs)
        except DomainError as exc:
            self.message_user(request, f"Not saved: {exc.message}", messages.ERROR)  # type: ignore[attr-defined]
            raise AdminAbort() from None

    def changeform_view(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        try:
            return super().changeform_view(request, *args, **kwargs)  # type: ignore[misc]
        except AdminAbort:
            return HttpResponseRedirect(request.get_full_path())

    def delete_view(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        try:
            return super().delete_view(request, *args, **kwargs)  # type: ignore[misc]
        except AdminAbort:
            return HttpResponseRedirect(request.get_full_path())


class ReadOnlyAdminMixin(TenantRoleAdminMixin):
    """Visible to the tenant's owners/admins, never written from the admin (audit logs, catalog entries)."""

    def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


def tenant_filter(field_path: str = "tenant") -> type[admin.SimpleListFilter]:
    """A "by tenant" list filter that offers only the tenants the viewer manages (never other tenants' names)."""

    class TenantFilter(admin.SimpleListFilter):
        title = "tenant"
        parameter_name = f"{field_path}__id__exact"

        def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[Any, str]]:
            return [(t.pk, t.slug) for t in tenants_for_admin(user=request.user).order_by("slug")]

        def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
            value = self.value()
            if not value:
                return queryset
            if not str(value).isdigit():
                return queryset.none()
            return queryset.filter(**{f"{field_path}__id": int(value)})

    return TenantFilter
