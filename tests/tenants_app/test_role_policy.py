"""The role policy (tenants_app.policies): one answer to "at least role R in tenant T", whichever side asks."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import AnonymousUser

from core.errors import NotFound, PermissionDenied
from core.roles import ROLE_RANK, Role, role_at_least, roles_at_least
from tenants_app.models import Membership
from tenants_app.permissions import ensure_role
from tenants_app.policies import ADMINS, MEMBERS, role_policy
from tenants_app.selectors import is_tenant_admin, tenants_for_admin
from tests.conftest import make_client
from tests.factories import MembershipFactory, TenantFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def grid() -> tuple[list[Any], dict[str, Any]]:
    """Two tenants; one user per role in the first (a viewer in the second too), a stranger, two operators."""
    acme, globex = TenantFactory(slug="acme-p"), TenantFactory(slug="globex-p")
    users: dict[str, Any] = {}
    for role in Role:
        users[role.value] = MembershipFactory(tenant=acme, role=role).user
    MembershipFactory(tenant=globex, user=users["owner"], role=Role.VIEWER)
    users["stranger"] = UserFactory()
    users["operator"] = UserFactory(is_superuser=True)
    users["operator-viewer"] = UserFactory(is_superuser=True)
    MembershipFactory(tenant=acme, user=users["operator-viewer"], role=Role.VIEWER)
    users["anonymous"] = AnonymousUser()
    return [acme, globex], users


def test_roles_at_least_is_role_at_least_as_a_list() -> None:
    for needed in Role:
        assert set(roles_at_least(needed)) == {r for r in Role if ROLE_RANK[r] >= ROLE_RANK[needed]}
        assert all(role_at_least(r, needed) for r in roles_at_least(needed))


def test_both_sides_agree_on_every_user_tenant_and_role(grid: Any) -> None:
    tenants, users = grid
    checked = 0
    for needed in Role:
        policy = role_policy(needed)
        for name, user in users.items():
            listed = set(policy.tenants(user=user).values_list("pk", flat=True))
            for tenant in tenants:
                denial = policy.why_not(tenant=tenant, user=user)
                assert (tenant.pk in listed) == (denial is None), (needed, name, tenant.slug)
                assert policy.allows(tenant=tenant, user=user) == (denial is None)
                # The service check (ensure_role) and the API's check on a membership say the same.
                try:
                    ensure_role(tenant=tenant, user=user, at_least=needed)
                    passed = True
                except (NotFound, PermissionDenied) as exc:
                    passed = False
                    assert isinstance(exc, NotFound) == (denial is not None and denial.code == "not_a_member")
                assert passed == (denial is None), (needed, name, tenant.slug)
                user_pk: Any = getattr(user, "pk", None)
                membership = Membership.objects.filter(tenant=tenant, user_id=user_pk).first()
                if membership is not None:
                    try:
                        policy.require_membership(membership, user=user)
                        api_passed = True
                    except PermissionDenied:
                        api_passed = False
                    assert api_passed == passed, (needed, name, tenant.slug)
                    in_members = policy.members(tenant=tenant).filter(pk=membership.pk).exists()
                    assert in_members == role_at_least(membership.role, needed)
                checked += 1
    assert checked == len(Role) * len(users) * len(tenants)


def test_the_old_names_answer_through_the_policy(grid: Any) -> None:
    tenants, users = grid
    for user in users.values():
        assert set(tenants_for_admin(user=user)) == set(ADMINS.tenants(user=user))
        for tenant in tenants:
            assert is_tenant_admin(tenant=tenant, user=user) == ADMINS.allows(tenant=tenant, user=user)


def test_a_lower_role_is_a_typed_403_naming_both_roles(grid: Any) -> None:
    tenants, users = grid
    with pytest.raises(PermissionDenied) as raised:
        ensure_role(tenant=tenants[0], user=users["viewer"], at_least=Role.ADMIN)
    assert raised.value.details == {"required_role": "admin", "role": "viewer"}
    assert MEMBERS.why_not(tenant=tenants[1], user=users["member"]).code == "not_a_member"  # type: ignore[union-attr]


def test_an_operator_passes_the_api_check_as_services_let_them(tenant: Any) -> None:
    """Superusers passed ensure_role (services) but not the API's role check: one policy now."""
    operator = UserFactory(is_superuser=True)
    MembershipFactory(tenant=tenant, user=operator, role=Role.VIEWER)
    client = make_client(operator, tenant.slug)
    resp = client.post("/api/v1/tools/", {"name": "by-operator", "type": "HTTP", "config": {
        "method": "GET", "url": "http://127.0.0.1:9/x"}}, format="json")
    assert resp.status_code == 201, resp.content
    viewer = make_client(MembershipFactory(tenant=tenant, role=Role.VIEWER).user, tenant.slug)
    refused = viewer.post("/api/v1/tools/", {"name": "by-viewer", "type": "HTTP", "config": {
        "method": "GET", "url": "http://127.0.0.1:9/x"}}, format="json")
    assert refused.status_code == 403 and refused.json()["error"]["details"]["required_role"] == "admin"
