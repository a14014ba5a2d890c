"""Resolve the request's tenant from X-Tenant and the user's memberships."""

from __future__ import annotations

from typing import Any

from core.errors import NotFound, TenantRequired
from tenants_app.models import Membership, Tenant
from tenants_app.selectors import membership_get, memberships_for_user


def resolve_tenant(user: Any, header: str | None) -> tuple[Tenant, Membership]:
    """X-Tenant names the tenant; a user with exactly one membership may omit it."""
    if header:
        membership = membership_get(user=user, tenant_slug=header.strip())
        return membership.tenant, membership
    memberships = list(memberships_for_user(user=user)[:2])
    if len(memberships) == 1:
        return memberships[0].tenant, memberships[0]
    if not memberships:
        raise NotFound()
    raise TenantRequired()
