"""Cached identity lookups: fewer queries per request, and every change takes effect on the next request."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.authtoken.models import Token

from tenants_app.models import Membership, Role
from tests.factories import ToolFactory

pytestmark = pytest.mark.django_db


def test_a_warm_request_resolves_token_and_membership_without_queries(
    tenant: Any, member_client: Any, django_assert_num_queries: Any
) -> None:
    client = member_client(tenant, Role.ADMIN)
    assert client.get("/api/v1/tools/?page_size=1").status_code == 200
    # Warm: token -> user and membership come from the cache, and so does the page itself (the tool list is kept
    # per tenant and query until a write to the tenant's tools): no query at all.
    with django_assert_num_queries(0):
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


def test_each_request_gets_its_own_copy_of_the_cached_identity(tenant: Any, member_client: Any) -> None:
    from tenants_app.auth_cache import CachedTokenAuthentication
    from tenants_app.selectors import membership_get

    client = member_client(tenant, Role.ADMIN)
    key = Token.objects.get(user=client.user).key
    auth = CachedTokenAuthentication()
    first_user, _ = auth.authenticate_credentials(key)
    first_user._perm_cache = {"leaked"}  # what Django's permission checks leave on a request's user
    second_user, _ = auth.authenticate_credentials(key)
    assert second_user is not first_user and second_user.pk == first_user.pk
    assert not hasattr(second_user, "_perm_cache")
    one = membership_get(user=client.user, tenant_slug=tenant.slug)
    one.tenant.name = "changed by one request"
    two = membership_get(user=client.user, tenant_slug=tenant.slug)
    assert two is not one and two.tenant is not one.tenant and two.tenant.name == tenant.name


def test_a_warm_request_reads_the_shared_cache_once(
    tenant: Any, member_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Token, membership and the tenant's tools come from process memory; one round trip reads the identity
    and tenant generations that say whether they still hold."""
    from django.core.cache import cache

    client = member_client(tenant, Role.ADMIN)
    tool = ToolFactory(tenant=tenant)
    assert client.get(f"/api/v1/tools/{tool.pk}/").status_code == 200
    reads: list[str] = []
    inside = [False]  # the test's local-memory cache implements get_many with get: count the outer call

    def counting(name: str, real: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            if not inside[0]:
                reads.append(name)
            inside[0], outer = True, inside[0]
            try:
                return real(*args, **kwargs)
            finally:
                inside[0] = outer
        return call

    for name in ("get", "get_many", "set", "add", "incr"):
        monkeypatch.setattr(cache, name, counting(name, getattr(cache, name)))
    assert client.get(f"/api/v1/tools/{tool.pk}/").status_code == 200
    assert reads == ["get_many"]


def test_a_change_made_by_another_process_is_seen_on_the_next_request(tenant: Any, member_client: Any) -> None:
    """Another process's write bumps the shared generation; this process's memory is then not used."""
    from django.core.cache import cache

    from core import hotcache

    client = member_client(tenant, Role.ADMIN)
    assert client.get("/api/v1/tool-calls/").status_code == 200
    Membership.objects.filter(user=client.user, tenant=tenant).update(role=Role.VIEWER)  # no signal here
    assert client.get("/api/v1/tool-calls/").status_code == 200  # still the remembered role: nothing said
    cache.incr("toolhub:gen:" + hotcache.AUTH)  # what the other process's signal does
    assert client.get("/api/v1/tool-calls/").status_code == 403
