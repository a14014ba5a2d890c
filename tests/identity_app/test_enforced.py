"""Enforced company sign-in: members with an email in the provider's domains cannot sign in with a password
(members' login, admin login); platform operators still can; other domains are untouched."""

from __future__ import annotations

from typing import Any

from django.test import Client

from identity_app.models import IdentityEvent, IdentityEventKind
from tenants_app.models import Role
from tests.factories import MembershipFactory, UserFactory


def _enforce(api: Any) -> None:
    resp = api.post("/api/v1/identity-providers/", {
        "name": "Acme SSO", "issuer": "https://login.acme.example", "client_id": "toolhub",
        "email_domains": ["acme.example"], "enforced": True}, format="json")
    assert resp.status_code == 201, resp.content


def _password_login(path: str, username: str, password: str = "pw") -> Any:
    return Client().post(path, {"username": username, "password": password, "next": "/playground/"})


def test_a_member_of_an_enforced_domain_cannot_use_a_password(api: Any, tenant: Any) -> None:
    user = UserFactory(username="pat", email="pat@acme.example", is_staff=True)
    MembershipFactory(tenant=tenant, user=user, role=Role.ADMIN)
    assert _password_login("/accounts/login/", "pat").status_code == 302  # before: signs in
    _enforce(api)
    refused = _password_login("/accounts/login/", "pat")
    assert refused.status_code == 200 and "sign in with Acme SSO" in refused.content.decode()
    admin = _password_login("/admin/login/", "pat")
    assert admin.status_code == 200  # the admin's login form again, not signed in
    assert IdentityEvent.objects.filter(kind=IdentityEventKind.SIGNIN_FAILED, user=user).count() == 2


def test_operators_and_other_domains_keep_their_passwords(api: Any, tenant: Any) -> None:
    _enforce(api)
    UserFactory(username="root", email="root@acme.example", is_superuser=True, is_staff=True)
    assert _password_login("/admin/login/", "root").status_code == 302  # break-glass
    other = UserFactory(username="quinn", email="quinn@partner.example")
    MembershipFactory(tenant=tenant, user=other, role=Role.MEMBER)
    assert _password_login("/accounts/login/", "quinn").status_code == 302


def test_enforcement_reaches_only_the_providers_own_tenant(api: Any, other_tenant: Any) -> None:
    _enforce(api)  # acme enforces acme.example
    outsider = UserFactory(username="rae", email="rae@acme.example")
    MembershipFactory(tenant=other_tenant, user=outsider, role=Role.MEMBER)
    assert _password_login("/accounts/login/", "rae").status_code == 302
