"""Shared fixtures: tenants, members with tokens, and API clients bound to a tenant."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from rest_framework.test import APIClient

from tenants_app.models import Role
from tenants_app.services import token_for_user
from tests.factories import MembershipFactory, TenantFactory, ToolFactory, UserFactory


def make_client(user: Any, tenant_slug: str | None) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_for_user(user=user)}")
    if tenant_slug:
        client.defaults["HTTP_X_TENANT"] = tenant_slug
    return client


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    """Rolled-back rows reuse ids: nothing cached by one test (identities, throttles) may reach the next."""
    from django.core.cache import cache

    cache.clear()


@pytest.fixture(autouse=True)
def _isolated_workspace(settings: Any, tmp_path_factory: Any) -> None:
    """Each test gets its own workspace root, so files never leak between tests."""
    settings.TOOLHUB_WORKSPACE_ROOT = tmp_path_factory.mktemp("workspace")


@pytest.fixture
def fresh_process_state() -> Any:
    """This process's own state (core.process_state: HTTP clients, executors) made anew for the test and after."""
    from core.process_state import reset_all

    reset_all()
    yield
    reset_all()


@pytest.fixture(scope="session")
def sql_demo_db() -> Any:
    from toolhub_demo.tools import ensure_sql_demo_database

    return ensure_sql_demo_database()


@pytest.fixture
def tenant(db: Any) -> Any:
    return TenantFactory(slug="acme")


@pytest.fixture
def other_tenant(db: Any) -> Any:
    return TenantFactory(slug="globex")


@pytest.fixture
def member_client(db: Any) -> Callable[..., APIClient]:
    """member_client(tenant, role) -> APIClient for a new user with that role."""

    def build(tenant: Any, role: str = Role.ADMIN, *, header: bool = True, user: Any = None) -> APIClient:
        user = user or UserFactory()
        MembershipFactory(tenant=tenant, user=user, role=role)
        client = make_client(user, tenant.slug if header else None)
        client.user = user  # type: ignore[attr-defined]
        return client

    return build


@pytest.fixture
def api(tenant: Any, member_client: Callable[..., APIClient]) -> APIClient:
    """An admin of tenant `acme`."""
    return member_client(tenant, Role.ADMIN)


@pytest.fixture
def staff(tenant: Any) -> Any:
    """A signed-in browser (Django's test Client) of a staff user who is an admin of tenant `acme`: the admin site."""
    from django.test import Client

    user = UserFactory(username="staff-admin", is_staff=True)
    MembershipFactory(tenant=tenant, user=user, role=Role.ADMIN)
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def other_api(other_tenant: Any, member_client: Callable[..., APIClient]) -> APIClient:
    """An admin of tenant `globex`."""
    return member_client(other_tenant, Role.ADMIN)


@pytest.fixture
def tool_factory(db: Any) -> type[ToolFactory]:
    return ToolFactory
