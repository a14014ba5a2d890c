"""Company sign-in through a real OpenID provider on loopback: users created on first sign-in, roles from groups
at every sign-in, and forged id tokens (issuer, audience, nonce, signature) refused."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.error import HTTPError
from urllib.parse import parse_qs, urlsplit
from urllib.request import HTTPRedirectHandler, build_opener

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from identity_app.models import IdentityEvent, IdentityEventKind
from tenants_app.models import Membership, Role
from tests.factories import MembershipFactory, UserFactory
from tests.fixtures.oidc_provider import OIDCProvider, Person

ROLE_MAP = {"toolhub-admins": "admin", "toolhub-users": "member", "toolhub-readers": "viewer"}


class _NoRedirect(HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


@pytest.fixture
def idp(settings: Any) -> Iterator[OIDCProvider]:
    settings.TOOLHUB_PUBLIC_URL = "http://testserver"
    with OIDCProvider() as provider:
        yield provider


def make_provider(api: Any, idp: OIDCProvider, **extra: Any) -> dict[str, Any]:
    body = {"name": "Acme SSO", "issuer": idp.issuer, "client_id": idp.client_id, "client_secret": idp.client_secret,
            "email_domains": ["acme.test"], "role_map": ROLE_MAP, **extra}
    resp = api.post("/api/v1/identity-providers/", body, format="json")
    assert resp.status_code == 201, resp.content
    return dict(resp.json())


def at_provider(url: str) -> str:
    """Follow the browser to the provider's authorize endpoint; the redirect back to Toolhub's callback."""
    opener = build_opener(_NoRedirect)
    try:
        opener.open(url)
    except HTTPError as exc:  # urllib raises it for the unfollowed 302
        return str(exc.headers["Location"])
    raise AssertionError("the provider did not redirect back")


def sign_in(browser: Client, provider_id: int, *, next_url: str = "/playground/") -> Any:
    start = browser.get(f"/accounts/sso/{provider_id}/?next={next_url}")
    assert start.status_code == 302, start.content
    back = urlsplit(at_provider(start["Location"]))
    assert back.path == "/accounts/sso/callback/"
    return browser.get(back.path + "?" + back.query)


def test_first_sign_in_creates_the_user_with_the_role_of_their_group(api: Any, tenant: Any, idp: OIDCProvider) -> None:
    provider = make_provider(api, idp)
    idp.person = Person(sub="u-100", email="Dana@acme.test", groups=["toolhub-users", "toolhub-admins"])
    browser = Client()
    resp = sign_in(browser, provider["id"])
    assert resp.status_code == 302 and resp["Location"] == "/playground/"
    user = get_user_model().objects.get(email="dana@acme.test")
    assert not user.has_usable_password()
    assert Membership.objects.get(tenant=tenant, user=user).role == Role.ADMIN  # the highest of two groups
    assert browser.get("/playground/").status_code == 200
    # The code exchange carried PKCE and the registered redirect URI.
    assert idp.token_requests[-1]["redirect_uri"] == "http://testserver/accounts/sso/callback/"
    event = IdentityEvent.objects.get(kind=IdentityEventKind.SIGNIN)
    assert (event.subject, event.role, event.provider_id) == ("u-100", "admin", provider["id"])


def test_a_group_change_takes_effect_at_the_next_sign_in(api: Any, tenant: Any, idp: OIDCProvider) -> None:
    provider = make_provider(api, idp)
    idp.person = Person(sub="u-200", email="eli@acme.test", groups=["toolhub-readers"])
    sign_in(Client(), provider["id"])
    user = get_user_model().objects.get(email="eli@acme.test")
    assert Membership.objects.get(tenant=tenant, user=user).role == Role.VIEWER
    idp.person = Person(sub="u-200", email="eli@acme.test", groups=["toolhub-users"])
    assert sign_in(Client(), provider["id"]).status_code == 302
    assert Membership.objects.get(tenant=tenant, user=user).role == Role.MEMBER
    assert get_user_model().objects.filter(email="eli@acme.test").count() == 1  # the same user, by subject
    changed = IdentityEvent.objects.filter(kind=IdentityEventKind.ROLE_CHANGED, user=user).first()
    assert changed is not None and changed.details == {"before": "viewer", "after": "member"}


def test_no_mapped_group_removes_the_membership_and_refuses(api: Any, tenant: Any, idp: OIDCProvider) -> None:
    provider = make_provider(api, idp)
    idp.person = Person(sub="u-300", email="flo@acme.test", groups=["toolhub-users"])
    sign_in(Client(), provider["id"])
    user = get_user_model().objects.get(email="flo@acme.test")
    idp.person = Person(sub="u-300", email="flo@acme.test", groups=["marketing"])
    browser = Client()
    resp = sign_in(browser, provider["id"])
    assert resp.status_code == 403 and "None of your groups" in resp.content.decode()
    assert not Membership.objects.filter(tenant=tenant, user=user).exists()
    assert browser.get("/playground/").status_code == 302  # not signed in
    assert IdentityEvent.objects.filter(kind=IdentityEventKind.SIGNIN_FAILED, user=user).exists()


def test_without_a_mapping_a_hand_set_role_stays(api: Any, tenant: Any, idp: OIDCProvider) -> None:
    provider = make_provider(api, idp, role_map={})
    user = UserFactory(username="gus", email="gus@acme.test")
    MembershipFactory(tenant=tenant, user=user, role=Role.ADMIN)
    idp.person = Person(sub="u-400", email="gus@acme.test", groups=["whatever"])
    assert sign_in(Client(), provider["id"]).status_code == 302
    assert Membership.objects.get(tenant=tenant, user=user).role == Role.ADMIN


@pytest.mark.parametrize(("forge", "says"), [
    ({"iss": "http://127.0.0.1:1/evil"}, "another issuer"),
    ({"aud": "some-other-client"}, "another client"),
    ({"nonce": "not-the-one-sent"}, "Nonce"),
    ({"key": "other"}, "signature"),
])
def test_a_forged_id_token_is_refused(api: Any, tenant: Any, idp: OIDCProvider, forge: dict[str, Any],
                                      says: str) -> None:
    provider = make_provider(api, idp)
    idp.person = Person(sub="u-500", email="hal@acme.test", groups=["toolhub-admins"])
    idp.forge = forge
    browser = Client()
    resp = sign_in(browser, provider["id"])
    assert resp.status_code == 403
    assert says in resp.content.decode()
    assert not get_user_model().objects.filter(email="hal@acme.test").exists()
    assert browser.get("/playground/").status_code == 302
    failed = IdentityEvent.objects.get(kind=IdentityEventKind.SIGNIN_FAILED)
    assert says in failed.message


def test_a_callback_state_is_single_use(api: Any, tenant: Any, idp: OIDCProvider) -> None:
    provider = make_provider(api, idp)
    idp.person = Person(sub="u-600", email="ivy@acme.test", groups=["toolhub-users"])
    browser = Client()
    start = browser.get(f"/accounts/sso/{provider['id']}/")
    back = urlsplit(at_provider(start["Location"]))
    assert browser.get(back.path + "?" + back.query).status_code == 302
    again = Client().get(back.path + "?" + back.query)  # another browser replaying the callback
    assert again.status_code == 400


def test_an_email_outside_the_providers_domains_is_refused(api: Any, tenant: Any, idp: OIDCProvider) -> None:
    provider = make_provider(api, idp)
    idp.person = Person(sub="u-700", email="jo@elsewhere.test", groups=["toolhub-admins"])
    resp = sign_in(Client(), provider["id"])
    assert resp.status_code == 403 and "not in the domains" in resp.content.decode()


def test_the_login_page_links_each_provider_and_the_email_domain_leads_to_it(api: Any, idp: OIDCProvider) -> None:
    provider = make_provider(api, idp)
    page = Client().get("/accounts/login/?next=/playground/").content.decode()
    assert "Sign in with Acme SSO" in page and f"/accounts/sso/{provider['id']}/" in page
    browser = Client()
    resp = browser.post("/accounts/sso/", {"email": "kim@ACME.test", "next": "/playground/"})
    assert resp.status_code == 302
    target = urlsplit(resp["Location"])
    assert f"{target.scheme}://{target.netloc}" == idp.issuer and target.path == "/authorize"
    query = parse_qs(target.query)
    assert query["code_challenge_method"] == ["S256"] and query["nonce"] and query["state"]
    assert Client().post("/accounts/sso/", {"email": "kim@unknown.test"}).status_code == 404


def test_the_provider_is_reached_through_the_outbound_guard(api: Any, idp: OIDCProvider, settings: Any) -> None:
    provider = make_provider(api, idp)
    settings.TOOLHUB_OUTBOUND_ALLOW = ""  # loopback no longer allowed: the guard refuses the provider
    resp = Client().get(f"/accounts/sso/{provider['id']}/")
    assert resp.status_code == 502 and "could not be reached" in resp.content.decode()


def test_another_tenants_member_is_never_taken_over_by_email(api: Any, tenant: Any, other_tenant: Any,
                                                              idp: OIDCProvider) -> None:
    provider = make_provider(api, idp)
    victim = UserFactory(username="vic", email="vic@acme.test")
    MembershipFactory(tenant=other_tenant, user=victim, role=Role.OWNER)
    idp.person = Person(sub="attacker-1", email="vic@acme.test", groups=["toolhub-admins"])
    browser = Client()
    resp = sign_in(browser, provider["id"])
    assert resp.status_code == 403 and "outside this tenant" in resp.content.decode()
    assert browser.get("/playground/").status_code == 302
    assert not Membership.objects.filter(tenant=tenant, user=victim).exists()
