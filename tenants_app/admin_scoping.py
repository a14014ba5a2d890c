"""Admin access by tenant role: owners and admins of a tenant manage its objects in the admin site.

Django's model permissions are not used for tenant staff: the membership role decides, and every
queryset is filtered to the tenants the user manages (superusers see everything).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import messages
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


class ReadOnlyAdminMixin(TenantRoleAdminMixin):
    """Visible to the tenant's owners/admins, never written from the admin (audit logs, catalog entries)."""

    def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
