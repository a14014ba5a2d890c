"""Tenant reads: every lookup is scoped to the user's memberships."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from core import hotcache
from core.errors import NotFound
from tenants_app.models import Membership, Role, Tenant


def membership_get(*, user: Any, tenant_slug: str) -> Membership:
    """The user's membership in an active tenant; NotFound for unknown and foreign tenants alike."""
    from tenants_app.auth_cache import cached

    def load() -> Membership | None:
        return (
            Membership.objects.select_related("tenant")
            .filter(user=user, tenant__slug=tenant_slug, tenant__is_active=True)
            .first()
        )

    membership = cached("membership", f"{user.pk}:{tenant_slug}", load)
    if membership is None:
        raise NotFound()
    hotcache.learn_tenant(tenant_slug, membership.tenant_id)
    return membership


def memberships_for_user(*, user: Any) -> QuerySet[Membership]:
    return Membership.objects.filter(user=user, tenant__is_active=True).select_related("tenant")


def membership_role(*, tenant: Tenant, user: Any) -> Role | None:
    row = Membership.objects.filter(tenant=tenant, user=user).values_list("role", flat=True).first()
    return Role(row) if row else None


def is_tenant_admin(*, tenant: Tenant, user: Any) -> bool:
    """Owner or admin of the tenant (superusers count as admins): the one "manages this tenant" rule."""
    if getattr(user, "is_superuser", False):
        return True
    return membership_role(tenant=tenant, user=user) in (Role.OWNER, Role.ADMIN)


def tenants_for_admin(*, user: Any) -> QuerySet[Tenant]:
    """Tenants a user may manage in the admin site: all for superusers, else where owner/admin."""
    if user.is_superuser:
        return Tenant.objects.all()
    return Tenant.objects.filter(memberships__user=user, memberships__role__in=[Role.OWNER, Role.ADMIN])
