"""Member sign-in at /accounts/login/: every member, staff or not, signs in there and can use the playground."""

from __future__ import annotations

from typing import Any

from django.test import Client

from core.links import public_url
from tenants_app.models import Role
from tests.agents_app.support import make_agent
from tests.factories import MembershipFactory, UserFactory


def test_playground_sends_a_signed_out_visitor_to_the_member_login(tenant: Any) -> None:
    resp = Client().get("/playground/?tenant=" + tenant.slug)
    assert resp.status_code == 302
    assert resp["Location"].startswith("/accounts/login/?next=")
    assert "/admin/" not in resp["Location"]


def test_a_plain_member_signs_in_and_chats_in_the_playground(tenant: Any, api: Any) -> None:
    make_agent(api, model=None, name="helper")
    user = UserFactory(username="mia", password="pw-member-1", is_staff=False)
    MembershipFactory(tenant=tenant, user=user, role=Role.MEMBER)
    browser = Client()
    page = browser.get("/accounts/login/?next=/playground/")
    html = page.content.decode()
    assert page.status_code == 200 and 'name="username"' in html and 'name="password"' in html
    assert "Toolhub" in html  # the admin's frame, not a bare form
    wrong = browser.post("/accounts/login/?next=/playground/", {"username": "mia", "password": "nope"})
    assert wrong.status_code == 200 and "nope" not in wrong.content.decode()
    resp = browser.post("/accounts/login/?next=/playground/", {"username": "mia", "password": "pw-member-1"})
    assert resp.status_code == 302 and resp["Location"] == "/playground/"
    play = browser.get("/playground/")
    assert play.status_code == 200 and "helper" in play.content.decode()
    assert 'href="/admin/"' not in play.content.decode() and 'action="/accounts/logout/"' in play.content.decode()
    # The member is still not staff: the admin keeps its own, staff-only login.
    assert browser.get("/admin/").status_code == 302


def test_login_refuses_an_offsite_next(tenant: Any) -> None:
    user = UserFactory(username="ned", password="pw-member-2")
    MembershipFactory(tenant=tenant, user=user, role=Role.MEMBER)
    resp = Client().post("/accounts/login/?next=https://evil.example/x", {"username": "ned", "password": "pw-member-2"})
    assert resp.status_code == 302 and "evil.example" not in resp["Location"]


def test_logout_signs_out(tenant: Any) -> None:
    user: Any = UserFactory(username="ola", password="pw-member-3")
    MembershipFactory(tenant=tenant, user=user, role=Role.MEMBER)
    browser = Client()
    browser.force_login(user)
    assert browser.get("/playground/").status_code == 200
    resp = browser.post("/accounts/logout/")
    assert resp.status_code == 302 and resp["Location"].startswith("/accounts/login/")
    assert browser.get("/playground/").status_code == 302


def test_public_url_defaults_to_the_request_origin_and_follows_the_setting(rf: Any, settings: Any) -> None:
    settings.ALLOWED_HOSTS = ["toolhub.test"]
    request = rf.get("/x", HTTP_HOST="toolhub.test:8000")
    settings.TOOLHUB_PUBLIC_URL = ""
    assert public_url("/oauth/callback/", request=request) == "http://toolhub.test:8000/oauth/callback/"
    settings.TOOLHUB_PUBLIC_URL = "https://hub.example.com/base/"
    assert public_url("/oauth/callback/", request=request) == "https://hub.example.com/base/oauth/callback/"
    assert public_url("/oauth/callback/") == "https://hub.example.com/base/oauth/callback/"
