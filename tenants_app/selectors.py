"""Tenant reads: every lookup is scoped to the user's memberships."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from core import hotcache
from core.errors import NotFound
from tenants_app import policies
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


def last_used_membership(*, user: Any, tenants: QuerySet[Tenant] | None = None) -> Membership | None:
    """The user's membership used most recently (of an active tenant, within `tenants` if given), or None."""
    qs = memberships_for_user(user=user).filter(last_used_at__isnull=False)
    if tenants is not None:
        qs = qs.filter(tenant__in=tenants)
    return qs.order_by("-last_used_at", "-pk").first()


def membership_role(*, tenant: Tenant, user: Any) -> Role | None:
    return policies.membership_role(tenant=tenant, user=user)


def is_tenant_admin(*, tenant: Tenant, user: Any) -> bool:
    """Owner or admin of the tenant (superusers count as admins): the role policy's ADMINS."""
    return policies.ADMINS.allows(tenant=tenant, user=user)


def tenants_for_admin(*, user: Any) -> QuerySet[Tenant]:
    """Tenants a user may manage in the admin site: the queryset side of the role policy's ADMINS."""
    return policies.ADMINS.tenants(user=user)
