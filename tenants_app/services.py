"""Tenant and membership writes: the only way to create or change tenants and memberships (API, admin, commands).

The rules, in one place:
- only an owner (or a superuser) changes tenant policy, renames or re-slugs a tenant, grants the owner
  role, or changes/removes an owner's membership; the last owner cannot be removed or demoted;
- a tenant admin adds members only as existing, active users named by username; a username that is
  unknown and one that may not be added answer the same error, so nothing reveals who exists;
- `is_active` and creating tenants are for superusers and operators (management commands).
`actor=None` means the operator at the command line (management commands), who may do everything.
"""

from __future__ import annotations

import re
from typing import Any, cast

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.utils import timezone
from rest_framework.authtoken.models import Token

from core.errors import Conflict, NotFound, PermissionDenied, ValidationFailed
from core.roles import role_at_least
from tenants_app import policies
from tenants_app.models import Membership, Role, Tenant
from tenants_app.permissions import ensure_role

SLUG_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")

# Fields only an owner may change; everything a tenant's admins cannot touch.
POLICY_FIELDS = frozenset({
    "command_interpreters", "sql_allowed_tables", "admins_can_approve", "approval_second_person",
    "allow_imported_auto_approve", "gateway_approvals_in_toolhub_only", "tool_screen", "approve_after_flagged_result",
})
TOOL_SCREEN_CHOICES = ("hold", "flag", "off")
IDENTITY_FIELDS = frozenset({"name", "slug"})
# The LOCAL server sandbox's network and memory are the platform's to grant, not the tenant's.
OPERATOR_FIELDS = frozenset({"is_active", "local_network", "local_memory_mb"})
TENANT_FIELDS = POLICY_FIELDS | IDENTITY_FIELDS | OPERATOR_FIELDS
NO_SUCH_USER = "no active user with that username can be added to this tenant"


def _is_operator(actor: Any) -> bool:
    return actor is None or policies.is_operator(actor)


def actor_role(*, tenant: Tenant, actor: Any) -> Role | None:
    """The actor's effective role: operators (no actor: a management command) and superusers act as owners."""
    if actor is None:
        return Role.OWNER
    return policies.VIEWERS.effective_role(tenant=tenant, user=actor)


def _require(*, tenant: Tenant, actor: Any, at_least: Role) -> Role:
    """The role check of every tenant write: a management command passes, everyone else the role policy."""
    if actor is None:
        return Role.OWNER
    return ensure_role(tenant=tenant, user=actor, at_least=at_least)


def _valid_slug(slug: str) -> str:
    if not isinstance(slug, str) or not SLUG_RE.match(slug):
        raise ValidationFailed(
            f"tenant slug {slug!r} is invalid; use lowercase letters, digits and '-' (max 64)",
            details={"field": "slug", "slug": slug},
        )
    return slug


@transaction.atomic
def tenant_create(*, slug: str, name: str, actor: Any = None) -> Tenant:
    """Create a tenant (operators and superusers); built-in tools are synced by the tools app's signal."""
    if not _is_operator(actor):
        raise PermissionDenied("only a superuser may create tenants")
    _valid_slug(slug)
    if Tenant.objects.filter(slug=slug).exists():
        raise Conflict(f"tenant {slug!r} already exists", details={"field": "slug", "slug": slug})
    return Tenant.objects.create(slug=slug, name=name or slug)


@transaction.atomic
def tenant_update(*, tenant: Tenant, actor: Any, changes: dict[str, Any]) -> Tenant:
    """Change a tenant's name, slug or policy (owners), or is_active (superusers). Unchanged values pass."""
    unknown = set(changes) - TENANT_FIELDS
    if unknown:
        raise ValidationFailed(f"unknown tenant field(s): {', '.join(sorted(unknown))}",
                               details={"accepted": sorted(TENANT_FIELDS)})
    row = Tenant.objects.select_for_update().get(pk=tenant.pk)
    changed = {k: v for k, v in changes.items() if getattr(row, k) != v}
    if not changed:
        return row
    if set(changed) & OPERATOR_FIELDS and not _is_operator(actor):
        raise PermissionDenied(
            f"only a platform operator (superuser) may change {', '.join(sorted(set(changed) & OPERATOR_FIELDS))}",
            details={"fields": sorted(set(changed) & OPERATOR_FIELDS)},
        )
    _check_choices(changed)
    if set(changed) & (POLICY_FIELDS | IDENTITY_FIELDS):
        _require(tenant=row, actor=actor, at_least=Role.OWNER)
    _check_values(row, changed)
    for key, value in changed.items():
        setattr(row, key, value)
    row.save(update_fields=list(changed))
    return row


def _check_choices(changed: dict[str, Any]) -> None:
    """The policy fields that take one of a few values."""
    if changed.get("local_network", "none") not in ("none", "public", "host"):
        raise ValidationFailed(f"local_network {changed['local_network']!r} is invalid; accepted: none, public, host",
                               details={"field": "local_network", "accepted": ["none", "public", "host"]})
    if changed.get("tool_screen", "hold") not in TOOL_SCREEN_CHOICES:
        raise ValidationFailed(f"tool_screen must be one of {', '.join(TOOL_SCREEN_CHOICES)}",
                               details={"field": "tool_screen", "accepted": list(TOOL_SCREEN_CHOICES)})


def _is_names(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _check_values(row: Tenant, changed: dict[str, Any]) -> None:
    """A free slug, a name, and lists of names where the policy takes lists."""
    if "slug" in changed:
        _valid_slug(changed["slug"])
        if Tenant.objects.filter(slug=changed["slug"]).exclude(pk=row.pk).exists():
            raise Conflict(f"tenant {changed['slug']!r} already exists",
                           details={"field": "slug", "slug": changed["slug"]})
    if "name" in changed and not str(changed["name"] or "").strip():
        raise ValidationFailed("a tenant needs a name", details={"field": "name"})
    if "command_interpreters" in changed and not _is_names(changed["command_interpreters"]):
        raise ValidationFailed("command_interpreters must be a list of program names",
                               details={"field": "command_interpreters"})
    if changed.get("sql_allowed_tables") is not None and not _is_names(changed["sql_allowed_tables"]):
        raise ValidationFailed("sql_allowed_tables must be a list of table names (or empty for the default)",
                               details={"field": "sql_allowed_tables"})


def _owners(tenant: Tenant) -> int:
    return Membership.objects.filter(tenant=tenant, role=Role.OWNER).count()


def _check_role(role: str) -> Role:
    if role not in Role.values:
        raise ValidationFailed(f"role {role!r} is invalid; accepted: {', '.join(Role.values)}",
                               details={"field": "role", "accepted": list(Role.values)})
    return Role(role)


def _require_owner_for_role(*, tenant: Tenant, actor: Any) -> None:
    """Granting or taking away the owner role needs an owner; the refusal names the role field."""
    try:
        _require(tenant=tenant, actor=actor, at_least=Role.OWNER)
    except PermissionDenied as exc:
        raise PermissionDenied(f"only an owner may grant or take away the owner role. {exc.message}",
                               details={**exc.details, "field": "role"}) from None


def _staff_for_managers(membership: Membership) -> None:
    # Tenant owners and admins manage their tenant in the admin site (scoped to it).
    user = membership.user
    if role_at_least(membership.role, Role.ADMIN) and not user.is_staff:
        user.is_staff = True
        user.save(update_fields=["is_staff"])


@transaction.atomic
def membership_add(
    *, tenant: Tenant, actor: Any, username: str, role: str, create_user: bool = False,
    password: str | None = None, email: str = "",
) -> Membership:
    """Add an existing user, named by username, to the tenant (admins; granting owner needs an owner).

    `create_user` (operators only, i.e. management commands) creates the user when missing.
    """
    wanted = _check_role(role)
    _require(tenant=tenant, actor=actor, at_least=Role.ADMIN)
    if wanted == Role.OWNER:
        _require_owner_for_role(tenant=tenant, actor=actor)
    if create_user and actor is not None:
        raise PermissionDenied("only an operator (management command) may create users")
    User = get_user_model()
    username = (username or "").strip()
    user = User.objects.filter(username=username).first() if username else None
    if user is None and create_user:
        user = User.objects.create(username=username, email=email)
        user.set_unusable_password()
        user.save(update_fields=["password"])
    if user is None or not user.is_active or (user.is_superuser and not _is_operator(actor)):
        # One answer for "unknown" and "not addable": nothing here reveals which users exist.
        raise ValidationFailed(NO_SUCH_USER, details={"field": "username", "username": username})
    if password and actor is None:
        user.set_password(password)
        user.save(update_fields=["password"])
    existing = Membership.objects.select_for_update().filter(tenant=tenant, user=user).first()
    if existing is not None:
        if actor is None:  # the operator's add_member re-roles, as it always has
            return membership_set_role(tenant=tenant, actor=None, membership_id=existing.pk, role=wanted)
        raise Conflict(f"{username!r} is already a member of this tenant",
                       details={"field": "username", "username": username})
    membership = Membership.objects.create(tenant=tenant, user=user, role=wanted)
    _staff_for_managers(membership)
    return membership


def _membership_for_update(*, tenant: Tenant, membership_id: Any) -> Membership:
    try:
        return Membership.objects.select_for_update().select_related("user").get(tenant=tenant, pk=int(membership_id))
    except (Membership.DoesNotExist, ValueError, TypeError, OverflowError):
        raise NotFound() from None


@transaction.atomic
def membership_set_role(*, tenant: Tenant, actor: Any, membership_id: Any, role: str) -> Membership:
    """Change a member's role (admins); owner in or out needs an owner; the last owner stays an owner."""
    wanted = _check_role(role)
    _require(tenant=tenant, actor=actor, at_least=Role.ADMIN)
    membership = _membership_for_update(tenant=tenant, membership_id=membership_id)
    if membership.role == wanted:
        return membership
    if Role.OWNER in (wanted, membership.role):
        _require_owner_for_role(tenant=tenant, actor=actor)
    if membership.role == Role.OWNER and _owners(tenant) <= 1:
        raise Conflict("a tenant keeps at least one owner; make someone else owner first", details={"field": "role"})
    membership.role = wanted
    membership.save(update_fields=["role"])
    _staff_for_managers(membership)
    return membership


@transaction.atomic
def membership_remove(*, tenant: Tenant, actor: Any, membership_id: Any) -> None:
    """Remove a member (admins); removing an owner needs an owner; the last owner cannot be removed."""
    _require(tenant=tenant, actor=actor, at_least=Role.ADMIN)
    membership = _membership_for_update(tenant=tenant, membership_id=membership_id)
    if membership.role == Role.OWNER:
        _require(tenant=tenant, actor=actor, at_least=Role.OWNER)
        if _owners(tenant) <= 1:
            raise Conflict("a tenant keeps at least one owner; make someone else owner first")
    membership.delete()


def token_for_user(*, user: Any) -> str:
    try:
        token, _ = Token.objects.get_or_create(user=user)
    except IntegrityError:  # a concurrent create won
        token = Token.objects.get(user=user)
    return cast(str, token.key)  # drf-stubs leave Token.key untyped


@transaction.atomic
def membership_mark_used(*, tenant: Tenant, actor: Any) -> None:
    """Remember that the actor works in `tenant` now, so the admin and the playground open it next time.

    A bare update: a timestamp is no change of who may do what, so no auth cache is invalidated."""
    if actor is None or not getattr(actor, "is_authenticated", False):
        return
    Membership.objects.filter(tenant=tenant, user=actor).update(last_used_at=timezone.now())
