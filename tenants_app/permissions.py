"""Role checks used by services (the API base checks roles too; services never trust a caller)."""

from __future__ import annotations

from typing import Any

from core.errors import NotFound, PermissionDenied
from tenants_app.models import ROLE_RANK, Role, Tenant
from tenants_app.selectors import membership_role


def ensure_role(*, tenant: Tenant, user: Any, at_least: Role) -> Role:
    """The user's role in `tenant` if it is at least `at_least`; superusers pass as owners."""
    if getattr(user, "is_superuser", False):
        return Role.OWNER
    role = membership_role(tenant=tenant, user=user)
    if role is None:
        raise NotFound()
    if ROLE_RANK[role] < ROLE_RANK[at_least]:
        raise PermissionDenied(
            f"This action needs the {at_least.value} role or higher in tenant {tenant.slug!r}; you are {role.value}.",
            details={"required_role": at_least.value, "role": role.value},
        )
    return role
