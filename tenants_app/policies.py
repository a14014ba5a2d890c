"""The role policy: "does this user hold at least role R in tenant T", answered one way everywhere.

One object per required role (`role_policy(Role.ADMIN)`, or `ADMINS`, `MEMBERS`...), with both sides of the
question: `why_not` (and `require`, `allows`) for one user and tenant, `tenants` (and `members`) as querysets.
Platform operators (superusers) pass as owners in every tenant, on both sides; everyone else by their
membership's role, compared by core.roles.role_at_least. A test checks the two sides agree on a grid.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from typing import Any

from django.db.models import QuerySet

from core.errors import NotFound, PermissionDenied
from core.roles import Role, role_at_least, roles_at_least
from tenants_app.models import Membership, Tenant


@dataclass(frozen=True)
class RoleDenial:
    """Why a user does not hold the role: `not_a_member` of the tenant, or `role_too_low`."""

    code: str
    message: str
    details: dict[str, Any] = field(default_factory=dict)

    def error(self) -> Exception:
        """The typed error: a non-member sees the tenant as missing (404), a lower role is refused (403)."""
        if self.code == "not_a_member":
            return NotFound()
        return PermissionDenied(self.message, details=self.details)


def is_operator(user: Any) -> bool:
    """A platform operator (superuser): passes every role check as an owner."""
    return bool(getattr(user, "is_superuser", False))


def membership_role(*, tenant: Tenant, user: Any) -> Role | None:
    """The user's own membership role in the tenant (None when not a member); operators get no special case here."""
    if getattr(user, "pk", None) is None:
        return None
    row = Membership.objects.filter(tenant=tenant, user=user).values_list("role", flat=True).first()
    return Role(row) if row else None


@dataclass(frozen=True)
class RolePolicy:
    """At least `needed` in a tenant."""

    needed: Role

    # --- one user -------------------------------------------------------------------------------------

    def effective_role(self, *, tenant: Tenant, user: Any) -> Role | None:
        """The role the checks use: owner for an operator, else the membership's role (None: not a member)."""
        return Role.OWNER if is_operator(user) else membership_role(tenant=tenant, user=user)

    def why_not_role(self, role: Role | str | None, *, tenant_slug: str, operator: bool = False) -> RoleDenial | None:
        """The rule itself, on a role already known (a cached membership, a principal): None when it passes."""
        if operator:
            return None
        if role is None:
            return RoleDenial("not_a_member", f"you are not a member of tenant {tenant_slug!r}")
        if role_at_least(role, self.needed):
            return None
        return RoleDenial(
            "role_too_low",
            f"This action needs the {self.needed.value} role or higher in tenant {tenant_slug!r}; "
            f"you are {Role(role).value}.",
            details={"required_role": self.needed.value, "role": Role(role).value},
        )

    def why_not(self, *, tenant: Tenant, user: Any) -> RoleDenial | None:
        if is_operator(user):
            return None
        return self.why_not_role(membership_role(tenant=tenant, user=user), tenant_slug=tenant.slug)

    def allows(self, *, tenant: Tenant, user: Any) -> bool:
        return self.why_not(tenant=tenant, user=user) is None

    def allows_role(self, role: Role | str | None, *, user: Any) -> bool:
        """`allows` for a role already loaded with the user (no query)."""
        return self.why_not_role(role, tenant_slug="", operator=is_operator(user)) is None

    def require(self, *, tenant: Tenant, user: Any) -> Role:
        """The user's effective role if it passes; NotFound for a non-member, PermissionDenied for a lower role."""
        role = self.effective_role(tenant=tenant, user=user)
        denial = self.why_not_role(role, tenant_slug=tenant.slug, operator=is_operator(user))
        if denial is not None:
            raise denial.error()
        assert role is not None
        return role

    def require_membership(self, membership: Membership, *, user: Any = None) -> None:
        """The API's check on the request's (cached) membership; `user` lets an operator pass."""
        denial = self.why_not_role(membership.role, tenant_slug=membership.tenant.slug, operator=is_operator(user))
        if denial is not None:
            raise denial.error()

    # --- the queryset side ----------------------------------------------------------------------------

    def tenants(self, *, user: Any) -> QuerySet[Tenant]:
        """Every tenant where the user passes: all of them for an operator."""
        if is_operator(user):
            return Tenant.objects.all()
        if getattr(user, "pk", None) is None:
            return Tenant.objects.none()
        return Tenant.objects.filter(memberships__user=user, memberships__role__in=roles_at_least(self.needed))

    def members(self, *, tenant: Tenant) -> QuerySet[Membership]:
        """The tenant's memberships that pass (operators pass without one, so they are not listed)."""
        return Membership.objects.filter(tenant=tenant, role__in=roles_at_least(self.needed))


@cache
def role_policy(needed: Role | str) -> RolePolicy:
    return RolePolicy(Role(needed))


VIEWERS = role_policy(Role.VIEWER)  # anyone in the tenant
MEMBERS = role_policy(Role.MEMBER)  # may call tools and chat
ADMINS = role_policy(Role.ADMIN)  # manage the tenant's tools, agents, models, market
OWNERS = role_policy(Role.OWNER)
