"""A member's connections have one home (`/connections/`, tools_app.connections); `/oauth/` and `/.well-known/`
belong to the authorization server. What upstream servers and old links know still works: the registered redirect
URI and old connect links forward for good with their query, the client metadata document stays at its URL (the
client id), the old member page forwards. The full flow through the registered redirect URI is
test_oauth_connections.py."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.urls import resolve, reverse

from tenants_app.models import Role
from tools_app.configs.auth import Draft, acts_as_user, declared_keys, is_oauth_tool, is_per_user
from tools_app.connections import paths
from tools_app.connections import urls as connection_urls

ROOT = Path(__file__).resolve().parents[2]


def test_every_route_is_the_path_its_constant_names() -> None:
    flow = uuid.uuid4()
    assert reverse("my-connections") == paths.HOME_PATH == "/connections/"
    # The connect link stays where the API contract (authorize_url) puts it.
    assert reverse("oauth-start", kwargs={"flow": flow}) == paths.START_PATH.format(flow=flow) == f"/oauth/start/{flow}/"
    assert reverse("oauth-callback") == paths.CALLBACK_PATH == "/connections/oauth/callback/"
    # Known upstream, never moved: the registered redirect URI and the client id document.
    assert reverse("oauth-registered-callback") == paths.REGISTERED_REDIRECT_PATH == "/oauth/callback/"
    assert reverse("oauth-client-metadata") == paths.CLIENT_METADATA_PATH == "/oauth/client-metadata.json"
    assert reverse("my-connections-moved") == "/accounts/connections/"
    assert paths.redirect_uri("https://hub.example.com/base/") == "https://hub.example.com/base/oauth/callback/"
    assert paths.home_url("http://testserver", "acme") == "http://testserver/connections/?tenant=acme"


def test_oauth_is_left_to_the_authorization_server() -> None:
    """Under /oauth/ the connections keep only what upstream servers or old links know; the rest is the gateway's."""
    kept = {"oauth/callback/", "oauth/client-metadata.json", "oauth/start/<uuid:flow>/"}
    for pattern in connection_urls.urlpatterns:
        route = str(pattern.pattern)
        assert route.startswith("connections/") or route in kept or route == "accounts/connections/", route
    for gateway_path in ("/oauth/authorize/", "/oauth/token/", "/oauth/register/", "/oauth/authorizations/",
                         "/.well-known/oauth-authorization-server"):
        assert resolve(gateway_path).func.__module__.startswith(("agents_app.gateway", "oauth2_provider")), gateway_path


@pytest.mark.django_db
def test_the_registered_callback_forwards_for_good_with_its_query_whole() -> None:
    query = "code=a%2Fb%2Bc&state=s+t%3D&iss=https%3A%2F%2Fissuer.example"
    for method in ("get", "head"):
        answer = getattr(Client(), method)("/oauth/callback/?" + query)
        assert answer.status_code == 308, method
        assert answer["Location"] == "/connections/oauth/callback/?" + query
    bare = Client().get("/oauth/callback/")
    assert bare.status_code == 308 and bare["Location"] == "/connections/oauth/callback/"


@pytest.mark.django_db
def test_the_connect_link_is_served_where_the_contract_puts_it() -> None:
    # An unknown flow is the start view's own refusal (not a forward, not the gateway's OAuth server).
    answer = Client().get(f"/oauth/start/{uuid.uuid4()}/")
    assert answer.status_code != 308 and resolve(f"/oauth/start/{uuid.uuid4()}/").url_name == "oauth-start"
    assert Client().get("/oauth/start/not-a-flow/").status_code == 404


def test_the_old_member_page_forwards_and_keeps_the_tenant(tenant: Any, member_client: Any) -> None:
    browser = Client()
    browser.force_login(member_client(tenant, Role.MEMBER).user)
    moved = browser.get("/accounts/connections/?tenant=acme")
    assert moved.status_code == 308 and moved["Location"] == "/connections/?tenant=acme"
    # (The test client re-sends a GET's `data` after a 308, not the Location's query: a browser takes the Location.)
    landed = browser.get("/accounts/connections/", {"tenant": "acme"}, follow=True)
    assert landed.status_code == 200 and landed.redirect_chain == [("/connections/?tenant=acme", 308)]
    assert "My connections" in landed.content.decode() and "Tools of <strong>" in landed.content.decode()
    # A form posted from a page opened before the move is posted again at the new home (308 keeps the method).
    posted = browser.post("/accounts/connections/?tenant=acme", {"action": "nonsense", "tool": "1"})
    assert posted.status_code == 308 and posted["Location"] == "/connections/?tenant=acme"


MEMBER_PAGES = [*sorted((ROOT / "templates" / "connections").glob("*.html")),
                *sorted((ROOT / "templates" / "oauth").glob("*.html")),
                ROOT / "templates" / "identity" / "refused.html",
                ROOT / "templates" / "registration" / "member_login.html"]


@pytest.mark.parametrize("template", MEMBER_PAGES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_member_page_has_the_one_frame(template: Path) -> None:
    assert template.read_text().startswith('{% extends "member/base.html" %}'), template


@dataclass
class Row:
    config: Any


def test_the_accessors_read_what_the_config_says() -> None:
    shared = Row(config={"url": "https://x", "auth": {"type": "oauth2"}})
    own = Row(config={"url": "https://x", "auth": {"type": "oauth2", "per_user": True}})
    keyed = Row(config={"command": "x", "user_secrets": ["GITHUB_TOKEN", "ORG"]})
    plain = Row(config={"url": "https://x", "auth": {"type": "none"}})
    for tool, oauth, per_user, keys, as_user in ((shared, True, False, [], False), (own, True, True, [], True),
                                                 (keyed, False, False, ["GITHUB_TOKEN", "ORG"], True),
                                                 (plain, False, False, [], False),
                                                 (Row(config=None), False, False, [], False),
                                                 (Draft({"auth": {"type": "oauth2", "per_user": True}}), True, True,
                                                  [], True), (Draft(None), False, False, [], False)):
        assert (is_oauth_tool(tool), is_per_user(tool), declared_keys(tool), acts_as_user(tool)) == \
            (oauth, per_user, keys, as_user), tool.config


RAW_READS = re.compile(r"""get\(\s*["'](user_secrets|per_user)["']|\[\s*["'](user_secrets|per_user)["']\s*\]"""
                       r"""|get\(\s*["']type["']\s*\)\s*[!=]=\s*["']oauth2["']"""
                       r"""|\b(?:if|and|or|not)\s+[\w.]*get\(\s*["']auth["']\s*\)""")  # "is it OAuth?" as a truth test


def test_no_caller_reads_the_connection_keys_of_a_config_raw() -> None:
    """Whether a tool is OAuth, per user, or which keys it declares is asked of tools_app.configs.auth only."""
    offenders = []
    for app in ("core", "tenants_app", "tools_app", "agents_app", "market_app", "identity_app"):
        for source in (ROOT / app).rglob("*.py"):
            relative = source.relative_to(ROOT).as_posix()
            if relative.startswith("tools_app/configs/") or "/migrations/" in relative:
                continue
            offenders += [f"{relative}: {m.group(0)}" for m in RAW_READS.finditer(source.read_text())]
    assert offenders == []
