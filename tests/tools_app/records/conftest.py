"""Fixtures for the record tools: the demo rows in two tenants, users holding given permissions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import Permission

from tenants_app.models import Role
from tests.factories import MembershipFactory, UserFactory
from toolhub_demo.records import seed_records


@pytest.fixture
def demo_rows(tenant: Any, other_tenant: Any) -> None:
    """The SQL demo's customers, products and orders, in tenant acme and (separately) in globex."""
    seed_records(tenant, None)
    seed_records(other_tenant, None)


@pytest.fixture
def user_with(tenant: Any) -> Callable[..., Any]:
    """user_with("view_order", "change_order", role=...) -> a member of acme holding those model permissions."""

    def build(*codenames: str, role: str = Role.MEMBER, username: str | None = None) -> Any:
        user = UserFactory(**({"username": username} if username else {}))
        MembershipFactory(tenant=tenant, user=user, role=role)
        perms = Permission.objects.filter(content_type__app_label="toolhub_demo", codename__in=codenames)
        assert perms.count() == len(codenames), codenames
        user.user_permissions.add(*perms)
        return type(user).objects.get(pk=user.pk)  # a fresh object: no stale permission cache

    return build
