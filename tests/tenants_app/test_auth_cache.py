"""Cached identity lookups: fewer queries per request, and every change takes effect on the next request."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.authtoken.models import Token

from tenants_app.models import Membership, Role

pytestmark = pytest.mark.django_db


def test_a_warm_request_resolves_token_and_membership_without_queries(
    tenant: Any, member_client: Any, django_assert_num_queries: Any
) -> None:
    client = member_client(tenant, Role.ADMIN)
    assert client.get("/api/v1/tools/?page_size=1").status_code == 200
    # Warm: token -> user and membership come from the cache; what is left is the page itself (count + rows
    # + functions).
    with django_assert_num_queries(3):
        assert client.get("/api/v1/tools/?page_size=1").status_code == 200


def test_a_deleted_token_is_refused_on_the_next_request(tenant: Any, member_client: Any) -> None:
    client = member_client(tenant, Role.ADMIN)
    assert client.get("/api/v1/tools/").status_code == 200
    Token.objects.filter(user=client.user).delete()
    resp = client.get("/api/v1/tools/")
    assert resp.status_code == 401


def test_a_deactivated_user_is_refused_on_the_next_request(tenant: Any, member_client: Any) -> None:
    client = member_client(tenant, Role.ADMIN)
    assert client.get("/api/v1/tools/").status_code == 200
    client.user.is_active = False
    client.user.save()
    assert client.get("/api/v1/tools/").status_code == 401


def test_a_demoted_member_loses_admin_actions_on_the_next_request(tenant: Any, member_client: Any) -> None:
    client = member_client(tenant, Role.ADMIN)
    assert client.get("/api/v1/tool-calls/").status_code == 200
    Membership.objects.filter(user=client.user, tenant=tenant).update(role=Role.VIEWER)  # no signal: bulk update
    from tenants_app.auth_cache import bump_generation

    bump_generation()
    assert client.get("/api/v1/tool-calls/").status_code == 403


def test_a_removed_member_gets_the_same_404_as_a_stranger(tenant: Any, member_client: Any) -> None:
    client = member_client(tenant, Role.ADMIN)
    assert client.get("/api/v1/tools/").status_code == 200
    Membership.objects.get(user=client.user, tenant=tenant).delete()
    resp = client.get("/api/v1/tools/")
    assert resp.status_code == 404 and resp.json()["error"]["code"] == "tenant_not_available"
    # Answered as for a tenant that does not exist (test_tenancy checks the bodies are equal).
    assert resp.json() == client.get("/api/v1/tools/", HTTP_X_TENANT="no-such-tenant").json()
