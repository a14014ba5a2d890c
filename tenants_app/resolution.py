"""Resolve the request's tenant from X-Tenant and the user's memberships."""

from __future__ import annotations

from typing import Any

from core.errors import NotFound, TenantNotAvailable, TenantRequired
from core.roles import Role
from tenants_app.models import Membership, Tenant
from tenants_app.policies import role_policy
from tenants_app.selectors import membership_get, memberships_for_user


def resolve_tenant(user: Any, header: str | None, at_least: Role | str | None = None) -> tuple[Tenant, Membership]:
    """X-Tenant names the tenant; a user with exactly one membership may omit it. With `at_least`, the role policy
    (tenants_app.policies) checks the membership as services apply it: an operator passes as owner."""
    tenant, membership = _resolve(user, header)
    if at_least is not None:
        role_policy(at_least).require_membership(membership, user=user)
    return tenant, membership


def _resolve(user: Any, header: str | None) -> tuple[Tenant, Membership]:
    if header:
        try:
            membership = membership_get(user=user, tenant_slug=header.strip())
        except NotFound:
            raise _not_available(user) from None
        return membership.tenant, membership
    memberships = list(memberships_for_user(user=user)[:2])
    if len(memberships) == 1:
        return memberships[0].tenant, memberships[0]
    if not memberships:
        raise TenantNotAvailable("You are not a member of any active tenant.")
    raise TenantRequired()


def _not_available(user: Any) -> TenantNotAvailable:
    """The same answer whether the named tenant exists or not: what the caller may use instead."""
    slugs = sorted(memberships_for_user(user=user).values_list("tenant__slug", flat=True)[:20])
    if not slugs:
        return TenantNotAvailable("X-Tenant names no tenant you are a member of; you belong to no active tenant.")
    return TenantNotAvailable(
        "X-Tenant names no tenant you are a member of (whether it exists is not said); "
        f"your tenants: {', '.join(slugs)}",
        details={"header": "X-Tenant", "your_tenants": slugs},
    )
