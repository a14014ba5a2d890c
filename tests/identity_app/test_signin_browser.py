"""A person signs in through a real OpenID provider (npm oidc-provider) in headless Chromium, with no local
password, and lands with their group's role; a group change takes effect at the next sign-in."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from tenants_app.models import Membership, Role
from tests.browser import MARKS, shot
from tests.factories import MembershipFactory, UserFactory
from tests.identity_app.oidc_node import node_available, node_provider
from tests.waiting import scaled_ms

pytestmark = [*MARKS, pytest.mark.skipif(not node_available(), reason="node and npm are not installed")]

CLIENT = {"client_id": "toolhub-test", "client_secret": "node-idp-secret"}


@pytest.fixture
def idp(live_server: Any, settings: Any, tmp_path: Any) -> Any:
    settings.TOOLHUB_PUBLIC_URL = live_server.url
    try:
        with node_provider(tmp_path, redirect_uri=f"{live_server.url}/accounts/sso/callback/", **CLIENT) as provider:
            yield provider
    except subprocess.CalledProcessError as exc:
        pytest.skip(f"npm could not install oidc-provider (registry unreachable?): {exc.stderr[-300:]!r}")


def _sign_in_in_chromium(page: Any, base: str, login: str) -> None:
    page.set_default_timeout(scaled_ms(30))
    page.goto(f"{base}/accounts/login/?next=/playground/")
    page.click("text=Sign in with Acme SSO")
    page.wait_for_selector("input[name=login]")  # the provider's own login page
    page.fill("input[name=login]", login)
    page.fill("input[name=password]", "anything")
    page.click("button[type=submit]")
    page.wait_for_selector("button[type=submit]")  # the provider's consent page
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/playground/**")


def test_a_person_signs_in_through_the_provider_and_gets_their_groups_role(
        live_server: Any, tenant: Any, idp: Any, browser: Any) -> None:
    admin = UserFactory(username="setup-admin")
    MembershipFactory(tenant=tenant, user=admin, role=Role.OWNER)
    api = APIClient()
    api.force_authenticate(admin)
    resp = api.post("/api/v1/identity-providers/", {
        "name": "Acme SSO", "issuer": idp.issuer, "email_domains": ["acme.example"], "groups_claim": "groups",
        "role_map": {"toolhub-admins": "admin", "toolhub-users": "member"}, **CLIENT,
    }, format="json", HTTP_X_TENANT=tenant.slug)
    assert resp.status_code == 201, resp.content
    idp.set_accounts({"dana": {"email": "dana@acme.example", "given_name": "Dana", "groups": ["toolhub-users"]}})

    page = browser.new_page()
    _sign_in_in_chromium(page, live_server.url, "dana")
    shot(page, "sso-signed-in")
    user = get_user_model().objects.get(email="dana@acme.example")
    assert not user.has_usable_password()
    assert Membership.objects.get(tenant=tenant, user=user).role == Role.MEMBER
    page.context.clear_cookies()

    idp.set_accounts({"dana": {"email": "dana@acme.example", "groups": ["toolhub-admins", "toolhub-users"]}})
    page = browser.new_page()
    _sign_in_in_chromium(page, live_server.url, "dana")
    assert Membership.objects.get(tenant=tenant, user=user).role == Role.ADMIN
