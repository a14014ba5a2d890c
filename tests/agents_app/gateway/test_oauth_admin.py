"""Operators see and control OAuth access: the agent's admin page shows the URL to paste and the clients
authorized for it (client, member, dates, never a token) with Revoke; grants go when their agent or member does."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client
from oauth2_provider.models import AccessToken, RefreshToken

from agents_app.models import Agent
from tenants_app.models import Membership
from tests import loopback
from tests.agents_app.gateway.oauth_support import CLIENT_NAME, tokens_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def setup(setup_undiscovered: Any) -> Any:
    """What these tests check is decided before any tool runs (OAuth pages, grants, initialize): the inventory tool
    is not discovered (a start of its SDK-built server, ~1.4 s of CPU, per test saved)."""
    return setup_undiscovered

MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "probe", "version": "1"}}}


def _status(served: Any, setup: Any, token: str) -> int:
    return loopback.post(served.endpoint("acme", setup.agent_id), json=INIT,
                         headers={**MCP_HEADERS, "Authorization": f"Bearer {token}"}).status_code


def _admin(username: str = "tina") -> Client:
    call_command("add_member", "acme", username, "--role", "admin", "--password", "pw")
    client = Client()
    assert client.login(username=username, password="pw")
    return client


def test_the_admin_page_lists_authorized_clients_and_revokes_them(served: Any, setup: Any) -> None:
    admin = _admin()
    client_id, issued = tokens_for(served, setup, "tina")
    assert _status(served, setup, issued["access_token"]) == 200
    page_url = f"/admin/agents_app/agent/{setup.agent_id}/change/"
    page = admin.get(page_url).content.decode()
    assert served.endpoint("acme", setup.agent_id).split("/mcp/")[1] in page  # the URL to paste
    section = page[page.index('id="mcp-oauth-clients"'):]
    assert CLIENT_NAME in section and "tina" in section and 'value="Revoke"' in section
    for secret in (issued["access_token"], issued["refresh_token"]):
        assert secret not in page

    user_id = Membership.objects.get(user__username="tina").user_id
    done = admin.post(f"/admin/agents_app/agent/{setup.agent_id}/revoke-authorization/",
                      {"client_id": client_id, "user_id": user_id})
    assert done.status_code == 302
    assert _status(served, setup, issued["access_token"]) == 401
    refresh = {"grant_type": "refresh_token", "client_id": client_id, "refresh_token": issued["refresh_token"]}
    assert loopback.post(f"{served.base_url}/oauth/token/", data=refresh).status_code == 400
    after = admin.get(page_url).content.decode()
    assert CLIENT_NAME not in after[after.index('id="mcp-oauth-clients"'):]


def test_another_tenants_admin_cannot_revoke(served: Any, setup: Any, other_tenant: Any) -> None:
    client_id, issued = tokens_for(served, setup)
    call_command("add_member", "globex", "gus", "--role", "admin", "--password", "pw")
    outsider = Client()
    assert outsider.login(username="gus", password="pw")
    resp = outsider.post(f"/admin/agents_app/agent/{setup.agent_id}/revoke-authorization/",
                         {"client_id": client_id, "user_id": setup.api.user.pk})
    assert resp.status_code in (302, 404)
    assert _status(served, setup, issued["access_token"]) == 200


@pytest.mark.parametrize("gone", ["agent", "membership"])
def test_grants_are_revoked_with_their_agent_or_member(served: Any, setup: Any, gone: str) -> None:
    tokens_for(served, setup)
    user = setup.api.user
    assert AccessToken.objects.filter(user=user).exists() and RefreshToken.objects.filter(user=user).exists()
    if gone == "agent":
        Agent.objects.filter(pk=setup.agent_id).delete()
    else:
        Membership.objects.filter(user=user).delete()
    assert not AccessToken.objects.filter(user=user).exists()
    assert not RefreshToken.objects.filter(user=user, revoked__isnull=True).exists()


def test_a_member_sees_and_revokes_their_own_authorizations(served: Any, setup: Any) -> None:
    call_command("add_member", "acme", "mo", "--role", "member", "--password", "pw")
    client_id, issued = tokens_for(served, setup, "mo")
    _, others = tokens_for(served, setup)  # the admin's own grant, which mo's page neither shows nor touches
    mo = Client()
    assert mo.login(username="mo", password="pw")
    page = mo.get("/oauth/authorizations/").content.decode()
    listing = page[page.index('id="my-authorizations"'):]
    assert CLIENT_NAME in listing and f"#{setup.agent_id}" in listing and listing.count('value="Revoke"') == 1
    assert issued["access_token"] not in page and issued["refresh_token"] not in page
    done = mo.post("/oauth/authorizations/", {"client_id": client_id, "tenant": "acme", "agent": setup.agent_id})
    assert done.status_code == 302
    assert _status(served, setup, issued["access_token"]) == 401
    assert _status(served, setup, others["access_token"]) == 200
    assert 'id="my-authorizations"' not in mo.get("/oauth/authorizations/").content.decode()


def test_no_admin_page_lists_oauth_tokens_or_codes(served: Any, setup: Any) -> None:
    admin = _admin()
    _, issued = tokens_for(served, setup, "tina")
    for model in ("accesstoken", "refreshtoken", "grant", "idtoken"):
        assert admin.get(f"/admin/oauth2_provider/{model}/").status_code == 404
    # A tenant admin does not manage the platform's clients either (superusers do).
    assert admin.get("/admin/oauth2_provider/application/").status_code in (302, 403)
    assert issued["access_token"] not in admin.get("/admin/").content.decode()
