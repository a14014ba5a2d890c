"""Role checks used by services (the API base checks roles too; services never trust a caller)."""

from __future__ import annotations

from typing import Any

from tenants_app.models import Role, Tenant
from tenants_app.policies import role_policy


def ensure_role(*, tenant: Tenant, user: Any, at_least: Role) -> Role:
    """The user's role in `tenant` if it is at least `at_least`; superusers pass as owners (the role policy)."""
    return role_policy(at_least).require(tenant=tenant, user=user)
