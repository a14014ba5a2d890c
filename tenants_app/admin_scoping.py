"""Admin access by tenant role: owners and admins of a tenant manage its objects in the admin site.

Django's model permissions are not used for tenant staff: the membership role decides, and every
queryset is filtered to the tenants the user manages (superusers see everything).
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

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
