"""Tenant writes: create tenants, add members, issue tokens."""

from __future__ import annotations

import re
from typing import Any

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from rest_framework.authtoken.models import Token

from core.errors import Conflict, ValidationFailed
from tenants_app.models import Membership, Role, Tenant

SLUG_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")


@transaction.atomic
def tenant_create(*, slug: str, name: str) -> Tenant:
    """Create a tenant; built-in tools are synced for it by the tools app's signal handler."""
    if not SLUG_RE.match(slug):
        raise ValidationFailed(
            f"tenant slug {slug!r} is invalid; use lowercase letters, digits and '-' (max 64)",
            details={"slug": slug},
        )
    if Tenant.objects.filter(slug=slug).exists():
        raise Conflict(f"tenant {slug!r} already exists", details={"slug": slug})
    return Tenant.objects.create(slug=slug, name=name or slug)


@transaction.atomic
def membership_add(
    *, tenant: Tenant, username: str, role: str, password: str | None = None, email: str = ""
) -> Membership:
    """Add (or re-role) a member, creating the user when missing."""
    if role not in Role.values:
        raise ValidationFailed(f"role {role!r} is invalid; accepted: {', '.join(Role.values)}")
    User = get_user_model()
    user, created = User.objects.get_or_create(username=username, defaults={"email": email})
    if password:
        user.set_password(password)
        user.save(update_fields=["password"])
    elif created:
        user.set_unusable_password()
        user.save(update_fields=["password"])
    membership, _ = Membership.objects.update_or_create(tenant=tenant, user=user, defaults={"role": role})
    if role in (Role.OWNER, Role.ADMIN) and not user.is_staff:
        # Tenant owners and admins manage their tenant in the admin site (scoped to it).
        user.is_staff = True
        user.save(update_fields=["is_staff"])
    return membership


def token_for_user(*, user: Any) -> str:
    try:
        token, _ = Token.objects.get_or_create(user=user)
    except IntegrityError:  # a concurrent create won
        token = Token.objects.get(user=user)
    return token.key
