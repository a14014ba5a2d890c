"""What Toolhub's authorization server refuses, driven with raw requests and the scripted browser against a real
server: denied consent, plain PKCE, unregistered redirects, members without access, tampered consent forms, a
resource that is not one agent; and the token's life: refresh rotation, revocation, membership/user/agent gone."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from oauth2_provider.models import AccessToken, Grant, RefreshToken

from agents_app.gateway.oauth.authorizations import authorizations_for_agent, authorizations_of_user
from agents_app.models import Agent
from tenants_app.models import Membership, Role
from tests import loopback
from tests.agents_app.gateway.oauth_support import (
    REDIRECT_URI,
    Pkce,
    authorize_url,
    code_for,
    consent_as,
    exchange,
    redirect_params,
    register,
    registered_client,
    tokens_for,
)
from tests.agents_app.gateway.warm import discovery_kept_for_calls
from tests.waiting import scaled

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def setup(setup_undiscovered: Any) -> Any:
    """What these tests refuse is decided before any tool runs: the inventory tool is not discovered (a start of its
    SDK-built server, 1.4 s of CPU, per test saved); the one test that calls it discovers it first."""
    return setup_undiscovered


MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "probe", "version": "1"}}}


def _at(served: Any, setup: Any, token: str) -> int:
    return loopback.post(served.endpoint("acme", setup.agent_id), json=INIT,
                         headers={**MCP_HEADERS, "Authorization": f"Bearer {token}"}).status_code


def _nothing_granted() -> bool:
    return not (Grant.objects.exists() or RefreshToken.objects.exists()
                or AccessToken.objects.filter(user__isnull=False).exists())


def test_denied_consent_answers_access_denied_and_leaves_nothing_behind(served: Any, setup: Any) -> None:
    client_id = registered_client(served.base_url)
    url = authorize_url(served.base_url, client_id, served.endpoint("acme", setup.agent_id), Pkce.make())
    resp, browser = consent_as(url, setup.api.user.username, allow=False)
    params = redirect_params(resp)
    assert params["error"] == "access_denied" and params["state"] == "st-1" and "code" not in params
    assert browser.consent_pages  # the person saw the page and said no
    assert _nothing_granted()


def test_plain_pkce_and_a_missing_challenge_are_refused_before_consent(served: Any, setup: Any) -> None:
    client_id = registered_client(served.base_url)
    resource = served.endpoint("acme", setup.agent_id)
    plain, browser = consent_as(authorize_url(served.base_url, client_id, resource, Pkce.make(), method="plain"),
                              setup.api.user.username)
    assert redirect_params(plain)["error"] == "invalid_request"
    assert not browser.consent_pages
    missing = authorize_url(served.base_url, client_id, resource, Pkce.make()).replace("code_challenge=", "x=")
    resp, _ = consent_as(missing, setup.api.user.username)
    assert redirect_params(resp)["error"] == "invalid_request"
    assert _nothing_granted()


def test_an_unregistered_redirect_uri_is_refused_without_redirecting(served: Any, setup: Any) -> None:
    client_id = registered_client(served.base_url)
    # Exact match: scheme, host, path and query. Only a loopback IP's port may differ (RFC 8252 section 7.3 says
    # the server MUST allow it: desktop clients take an ephemeral port).
    for elsewhere in ("http://127.0.0.1:33418/other", "http://localhost:33418/callback", "https://evil.example/cb",
                      "http://127.0.0.1:33418/callback?x=1", "https://127.0.0.1:33418/callback"):
        url = authorize_url(served.base_url, client_id, served.endpoint("acme", setup.agent_id), Pkce.make(),
                            redirect_uri=elsewhere)
        resp, browser = consent_as(url, setup.api.user.username)
        assert resp.status_code == 400 and "location" not in resp.headers
        assert not browser.consent_pages
    assert _nothing_granted()


@pytest.mark.parametrize("uris", [["http://evil.example/cb"], ["myapp://cb"], ["https://ok.example/cb#frag"], [],
                                  ["javascript:alert(1)"], ["http://user:pw@127.0.0.1/cb"]])
def test_registration_refuses_redirect_uris_that_are_not_https_or_loopback(served: Any, uris: list[str]) -> None:
    resp = loopback.post(f"{served.base_url}/oauth/register/", json={"client_name": "x", "redirect_uris": uris})
    assert resp.status_code == 400
    assert resp.json()["error"] == "invalid_client_metadata"


def test_registration_makes_public_clients_only(served: Any) -> None:
    confidential = register(served.base_url, ["https://claude.ai/api/mcp/auth_callback"],
                            token_endpoint_auth_method="client_secret_post")
    assert confidential.status_code == 201
    assert confidential.json()["token_endpoint_auth_method"] == "none" and "client_secret" not in confidential.json()
    for grants in (["client_credentials"], ["password"], ["implicit"]):
        assert register(served.base_url, grant_types=grants).status_code == 400


def test_a_member_without_access_to_the_agent_is_refused_at_consent(
    served: Any, setup: Any, other_tenant: Any, member_client: Any
) -> None:
    outsider = member_client(other_tenant, Role.ADMIN)
    client_id = registered_client(served.base_url)
    url = authorize_url(served.base_url, client_id, served.endpoint("acme", setup.agent_id), Pkce.make())
    resp, browser = consent_as(url, outsider.user.username)
    assert resp.status_code == 403 and 'id="oauth-refused"' in resp.text
    assert not browser.consent_pages
    assert _nothing_granted()


def test_a_tampered_consent_form_cannot_grant_another_agent(
    served: Any, setup: Any, other_tenant: Any, member_client: Any
) -> None:
    theirs = make_foreign_agent(member_client, other_tenant)
    client_id = registered_client(served.base_url)
    url = authorize_url(served.base_url, client_id, served.endpoint("acme", setup.agent_id), Pkce.make())
    resp, _ = consent_as(url, setup.api.user.username, tamper={"resource": served.endpoint("globex", theirs)})
    assert resp.status_code == 403
    assert _nothing_granted()


def make_foreign_agent(member_client: Any, tenant: Any) -> int:
    from tests.agents_app.support import make_agent

    return int(make_agent(member_client(tenant, Role.ADMIN), model=None, name="theirs"))


@pytest.mark.parametrize("resource", ["", "https://elsewhere.example/mcp/acme/agents/{id}/", "{base}/api/v1/",
                                      "{base}/mcp/acme/agents/{id}/?x=1"])
def test_a_resource_that_is_not_one_agent_here_is_refused(served: Any, setup: Any, resource: str) -> None:
    client_id = registered_client(served.base_url)
    named = resource.format(base=served.base_url, id=setup.agent_id)
    url = authorize_url(served.base_url, client_id, named, Pkce.make())
    if not named:
        url = url.replace("resource=&", "")
    resp, browser = consent_as(url, setup.api.user.username)
    assert redirect_params(resp)["error"] == "invalid_target"
    assert not browser.consent_pages
    assert _nothing_granted()


def test_consent_is_asked_every_time(served: Any, setup: Any) -> None:
    tokens_for(served, setup)
    client_id = registered_client(served.base_url)
    url = authorize_url(served.base_url, client_id, served.endpoint("acme", setup.agent_id), Pkce.make())
    _, browser = consent_as(url + "&approval_prompt=auto", setup.api.user.username)
    assert len(browser.consent_pages) == 1


def test_the_token_request_cannot_change_the_resource_or_skip_the_verifier(served: Any, setup: Any) -> None:
    client_id, resource, pkce, code = code_for(served, setup)
    wrong = exchange(served.base_url, client_id, code, pkce, served.endpoint("acme", setup.agent_id + 1000))
    assert wrong.status_code == 400 and wrong.json()["error"] == "invalid_target"
    assert exchange(served.base_url, client_id, code, Pkce.make(), resource).status_code == 400


def test_refresh_tokens_rotate_and_a_reused_one_revokes_the_family(served: Any, setup: Any) -> None:
    client_id, first = tokens_for(served, setup)
    refresh = {"grant_type": "refresh_token", "client_id": client_id, "refresh_token": first["refresh_token"]}
    second = loopback.post(f"{served.base_url}/oauth/token/", data=refresh)
    assert second.status_code == 200, second.text
    rotated = second.json()
    assert rotated["refresh_token"] != first["refresh_token"]
    assert _at(served, setup, rotated["access_token"]) == 200
    reused = loopback.post(f"{served.base_url}/oauth/token/", data=refresh)
    assert reused.status_code == 400 and reused.json()["error"] == "invalid_grant"
    # Reuse of a spent refresh token is taken as theft: the whole family is revoked.
    assert _at(served, setup, rotated["access_token"]) == 401


def test_a_replayed_code_is_refused_and_revokes_what_it_issued(served: Any, setup: Any) -> None:
    client_id, resource, pkce, code = code_for(served, setup)
    first = exchange(served.base_url, client_id, code, pkce, resource)
    assert first.status_code == 200, first.text
    issued = first.json()
    refresh = {"grant_type": "refresh_token", "client_id": client_id, "refresh_token": issued["refresh_token"]}
    rotated = loopback.post(f"{served.base_url}/oauth/token/", data=refresh).json()
    assert _at(served, setup, rotated["access_token"]) == 200
    # Another client's tokens are not this code's family.
    _, bystander = tokens_for(served, setup)

    replay = exchange(served.base_url, client_id, code, pkce, resource)
    assert replay.status_code == 400 and replay.json()["error"] == "invalid_grant"
    assert _at(served, setup, issued["access_token"]) == 401
    assert _at(served, setup, rotated["access_token"]) == 401
    again = {**refresh, "refresh_token": rotated["refresh_token"]}
    assert loopback.post(f"{served.base_url}/oauth/token/", data=again).status_code == 400
    assert _at(served, setup, bystander["access_token"]) == 200


def test_revocation_ends_the_token_at_once(served: Any, setup: Any) -> None:
    client_id, issued = tokens_for(served, setup)
    assert _at(served, setup, issued["access_token"]) == 200
    resp = loopback.post(f"{served.base_url}/oauth/revoke/", data={"token": issued["access_token"],
                                                                   "client_id": client_id})
    assert resp.status_code == 200
    assert _at(served, setup, issued["access_token"]) == 401
    refresh = {"grant_type": "refresh_token", "client_id": client_id, "refresh_token": issued["refresh_token"]}
    assert loopback.post(f"{served.base_url}/oauth/token/", data=refresh).status_code == 400


@pytest.mark.parametrize("gone", ["membership", "user", "agent"])
def test_tokens_stop_working_when_the_membership_the_user_or_the_agent_goes(
    served: Any, setup: Any, member_client: Any, gone: str
) -> None:
    member = member_client(setup.tenant, Role.MEMBER)
    _, issued = tokens_for(served, setup, member.user.username)
    assert _at(served, setup, issued["access_token"]) == 200
    if gone == "membership":
        Membership.objects.filter(user=member.user, tenant=setup.tenant).delete()
    elif gone == "user":
        member.user.is_active = False
        member.user.save()
    else:
        Agent.objects.filter(pk=setup.agent_id).delete()
    assert _at(served, setup, issued["access_token"]) in (401, 404)


def test_the_registration_access_token_is_not_a_gateway_token(served: Any, setup: Any) -> None:
    registration = register(served.base_url).json()["registration_access_token"]
    assert _at(served, setup, registration) == 401
    assert REDIRECT_URI  # the registered redirect is the loopback one every test uses


def test_open_registration_is_rate_limited_per_address(served: Any, settings: Any) -> None:
    from django.core.cache import cache

    cache.clear()
    settings.TOOLHUB_OAUTH_REGISTRATIONS_PER_HOUR = 2
    assert [register(served.base_url).status_code for _ in range(3)] == [201, 201, 429]


def test_a_registration_update_obeys_the_registration_rules(served: Any) -> None:
    registered = register(served.base_url).json()
    manage = {"Authorization": f"Bearer {registered['registration_access_token']}"}
    uri = registered["registration_client_uri"]
    evil = loopback.put(uri, json={"client_name": "x", "redirect_uris": ["http://evil.example/cb"]}, headers=manage)
    assert evil.status_code == 400 and evil.json()["error"] == "invalid_client_metadata"
    secret = loopback.put(uri, json={"client_name": "y", "redirect_uris": [REDIRECT_URI],
                                     "token_endpoint_auth_method": "client_secret_basic"}, headers=manage)
    assert secret.status_code == 200 and secret.json()["token_endpoint_auth_method"] == "none"
    assert "client_secret" not in secret.json()


def test_the_server_offers_the_code_grant_and_refresh_only() -> None:
    from agents_app.gateway.oauth.server import GatewayServer
    from agents_app.gateway.oauth.validator import GatewayValidator

    server = GatewayServer(GatewayValidator())
    assert sorted(server.grant_types) == ["authorization_code", "refresh_token"]
    assert sorted(server.response_types) == ["code"]
    assert sorted(server.auth_grant._code_challenge_methods) == ["S256"]


def test_a_call_through_a_token_is_its_clients_last_use(served: Any, setup: Any) -> None:
    with discovery_kept_for_calls():  # discovered, as the shared setup; the call reuses its server
        assert setup.api.post(f"/api/v1/tools/{setup.tool_id}/refresh/").json()["ok"]
    _, issued = tokens_for(served, setup)
    hour_ago = timezone.now() - timedelta(hours=1)
    AccessToken.objects.update(created=hour_ago, updated=hour_ago)
    RefreshToken.objects.update(created=hour_ago, updated=hour_ago)
    (before,) = authorizations_of_user(user=setup.api.user)
    assert before.last_used == hour_ago
    assert _call(served, setup, issued["access_token"], "inventory__get_inventory", {"sku": "DEMO-001"})
    (after,) = authorizations_of_user(user=setup.api.user)
    assert after.last_used > hour_ago + timedelta(minutes=59)
    (shown,) = authorizations_for_agent(tenant=setup.tenant, agent_id=setup.agent_id)
    assert shown.last_used == after.last_used


def _call(served: Any, setup: Any, token: str, name: str, arguments: dict[str, Any]) -> bool:
    """initialize, then one tools/call over streamable HTTP with the bearer token: whether it succeeded."""
    url = served.endpoint("acme", setup.agent_id)
    with loopback.client(headers={**MCP_HEADERS, "Authorization": f"Bearer {token}"}, timeout=scaled(30)) as http:
        init = http.post(url, json=INIT)
        session = {"mcp-session-id": init.headers["mcp-session-id"]} if "mcp-session-id" in init.headers else {}
        http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
        resp = http.post(url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                    "params": {"name": name, "arguments": arguments}}, headers=session)
    text = resp.text
    body = json.loads(text[text.index("{"):text.rindex("}") + 1]) if "data:" in text else resp.json()
    return resp.status_code == 200 and not body["result"].get("isError")
