"""Membership roles and their order: the one place that says who outranks whom."""

from __future__ import annotations

from django.db import models


class Role(models.TextChoices):
    OWNER = "owner", "Owner"
    ADMIN = "admin", "Admin"
    MEMBER = "member", "Member"
    VIEWER = "viewer", "Viewer"


ROLE_RANK = {Role.VIEWER: 0, Role.MEMBER: 1, Role.ADMIN: 2, Role.OWNER: 3}


def role_at_least(role: Role | str, needed: Role | str) -> bool:
    """The one role comparison: `role` ranks at or above `needed`."""
    return ROLE_RANK[Role(role)] >= ROLE_RANK[Role(needed)]


def roles_at_least(needed: Role | str) -> list[Role]:
    """Every role that passes `role_at_least(role, needed)`: the same comparison, for a query's `role__in`."""
    return [role for role in Role if role_at_least(role, needed)]
