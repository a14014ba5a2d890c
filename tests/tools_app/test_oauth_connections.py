"""Connecting an OAuth-protected REMOTE tool end to end: API link, signed-in browser, provider, callback."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode, urlparse

import pytest
from django.test import Client
from django.utils import timezone

from tenants_app.models import Role
from tests.fixtures.mcp_servers import OAUTH_SERVER, expire_access_tokens, http_server
from tests.tools_app.runtime.mcp.test_oauth_client import browse
from tests.waiting import scaled
from tools_app.models import OAuthConnection, OAuthRegistration, ToolCall

pytestmark = pytest.mark.django_db(transaction=True)
CALLBACK = "http://testserver/oauth/callback/"


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    with http_server(OAUTH_SERVER, extra_args=("--access-ttl", "60")) as url:
        yield url


def make_tool(api: Any, url: str, *, per_user: bool = False, name: str = "linear") -> int:
    resp = api.post("/api/v1/tools/", {"name": name, "type": "REMOTE", "config": {
        "url": url, "auth": {"type": "oauth2", "per_user": per_user}}}, format="json")
    assert resp.status_code == 201, resp.content
    return int(resp.json()["id"])


def signed_in(user: Any) -> Client:
    browser = Client()
    browser.force_login(user)
    return browser


def provider_answer(browser: Client, link: str, user: str = "alice") -> dict[str, str]:
    """Open our start link in `browser`, then let the provider (auto-consent) send us back: the callback query."""
    started = browser.get(urlparse(link).path)
    assert started.status_code == 302, started.content.decode()[:500]
    return {k: v[0] for k, v in browse(started["Location"], user, callback=CALLBACK).items()}


def test_shared_connection_end_to_end(api: Any, server_url: str) -> None:
    tool_id = make_tool(api, server_url)
    resp = api.post(f"/api/v1/tools/{tool_id}/oauth/connect/")
    assert resp.status_code == 200, resp.content
    body = resp.json()
    assert body["authorize_url"].startswith("http://testserver/oauth/start/") and body["expires_in"] > 0
    browser = signed_in(api.user)
    query = provider_answer(browser, body["authorize_url"])
    # The provider sends the browser to the redirect URI it registered: it forwards for good, the query kept whole.
    landed = browser.get("/oauth/callback/?" + urlencode(query))
    assert landed.status_code == 308 and landed["Location"] == "/connections/oauth/callback/?" + urlencode(query)
    done = browser.get(landed["Location"])
    assert done.status_code == 200, done.content.decode()[:800]
    assert "linear is connected with the shared account" in done.content.decode()
    connection = OAuthConnection.objects.get(tool_id=tool_id)
    assert connection.user is None and connection.status == "connected"
    tokens = connection.tokens
    assert tokens["access_token"].startswith("at-") and tokens["refresh_token"].startswith("rt-")
    # Tokens are ciphertext in the column, and nowhere in what was answered.
    from django.db import connection as db

    with db.cursor() as cur:
        cur.execute("SELECT tokens FROM tools_app_oauthconnection")
        raw = cur.fetchone()[0]
    for secret in (tokens["access_token"], tokens["refresh_token"], query["code"]):
        assert secret not in raw
        assert secret not in done.content.decode() and secret not in resp.content.decode()
    # The code is good once: replaying the callback connects nothing more.
    again = browser.get("/oauth/callback/", query, follow=True)
    assert again.status_code == 400 and query["code"] not in again.content.decode()
    # A second connect reuses the registration made for this authorization server.
    assert api.post(f"/api/v1/tools/{tool_id}/oauth/connect/").status_code == 200
    assert OAuthRegistration.objects.count() == 1


def test_a_link_opened_by_another_user_connects_nothing(api: Any, member_client: Any, tenant: Any,
                                                       server_url: str) -> None:
    tool_id = make_tool(api, server_url)
    started = api.post(f"/api/v1/tools/{tool_id}/oauth/connect/")
    assert started.status_code == 200, started.content  # a refusal names its step (seen once under load: a 400)
    link = started.json()["authorize_url"]
    mallory = member_client(tenant, Role.ADMIN).user
    hijacked = signed_in(mallory).get(urlparse(link).path)
    assert hijacked.status_code == 400 and "not yours" in hijacked.content.decode()
    # Nor can the other user finish a flow the owner started: the callback checks user and session.
    owner = signed_in(api.user)
    query = provider_answer(owner, link)
    stolen = signed_in(mallory).get("/oauth/callback/", query, follow=True)
    assert stolen.status_code == 400
    other_session = signed_in(api.user).get("/oauth/callback/", query, follow=True)
    assert other_session.status_code == 400 and "another browser" in other_session.content.decode()
    assert not OAuthConnection.objects.exists()
    # A signed-out visitor is sent to the member sign-in first.
    anonymous = Client().get(urlparse(link).path)
    assert anonymous.status_code == 302 and anonymous["Location"].startswith("/accounts/login/")


def test_shared_connection_needs_an_admin_and_a_non_oauth_tool_is_named(api: Any, member_client: Any, tenant: Any,
                                                                       server_url: str) -> None:
    tool_id = make_tool(api, server_url)
    member = member_client(tenant, Role.MEMBER)
    refused = member.post(f"/api/v1/tools/{tool_id}/oauth/connect/")
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "permission_denied"
    plain = api.post("/api/v1/tools/", {"name": "plain", "type": "REMOTE", "config": {"url": server_url}},
                     format="json").json()["id"]
    resp = api.post(f"/api/v1/tools/{plain}/oauth/connect/")
    assert resp.status_code == 400 and resp.json()["error"]["details"]["field"] == "config.auth.type"
    assert not ToolCall.objects.exists()


def connect_shared(api: Any, tool_id: int) -> dict[str, str]:
    started = api.post(f"/api/v1/tools/{tool_id}/oauth/connect/")
    assert started.status_code == 200, started.content  # a refusal names its step (seen once under load: a 400)
    link = started.json()["authorize_url"]
    browser = signed_in(api.user)
    query = provider_answer(browser, link)
    assert browser.get("/oauth/callback/", query, follow=True).status_code == 200
    return query


def discovered_then_disconnected(api: Any, url: str) -> tuple[int, str]:
    """An oauth2 tool that was connected (so its functions are known) and then disconnected: (tool id, a function)."""
    tool_id = make_tool(api, url)
    connect_shared(api, tool_id)
    refreshed = api.post(f"/api/v1/tools/{tool_id}/refresh/").json()
    assert refreshed["ok"], refreshed
    assert api.delete(f"/api/v1/tools/{tool_id}/oauth/").status_code in (200, 204)
    return tool_id, str(refreshed["functions"][0]["name"])


def invoke(client: Any, tool_id: int, function: str) -> dict[str, Any]:
    resp = client.post(f"/api/v1/tools/{tool_id}/invoke/", {"function": function, "arguments": {}}, format="json")
    assert resp.status_code == 200, resp.content
    return dict(resp.json())


def expired_everywhere(url: str, tool_id: int) -> None:
    """The tool's access token has expired: in the provider's view (it refuses the token) and in ours (its stated
    expiry is past). Time is set, not waited for."""
    assert expire_access_tokens(url) >= 1
    assert OAuthConnection.objects.filter(tool_id=tool_id).update(
        expires_at=timezone.now() - dt.timedelta(seconds=1)) == 1


def test_calls_use_the_shared_connection_and_refresh_under_a_race(api: Any, member_client: Any, tenant: Any,
                                                                 server_url: str) -> None:
    import threading

    tool_id = make_tool(api, server_url, name="racer")
    before = api.post(f"/api/v1/tools/{tool_id}/test/")
    assert before.json()["error"]["code"] == "authorization_required", before.content
    assert before.json()["authorize_url"].startswith("http://testserver/oauth/start/")  # the admin's own link
    connect_shared(api, tool_id)
    assert api.post(f"/api/v1/tools/{tool_id}/refresh/").status_code == 200
    member = member_client(tenant, Role.MEMBER)
    first = invoke(member, tool_id, "whoami")  # a member's call acts as the shared account
    assert first["success"] and "alice" in first["text"], first
    issued = [OAuthConnection.objects.get(tool_id=tool_id).tokens]
    expired_everywhere(server_url, tool_id)
    results: list[dict[str, Any]] = []
    barrier = threading.Barrier(8)

    def call() -> None:
        barrier.wait()
        results.append(invoke(member, tool_id, "whoami"))

    threads = [threading.Thread(target=call) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(scaled(60))
    assert len(results) == 8 and all(r["success"] for r in results), results
    issued.append(OAuthConnection.objects.get(tool_id=tool_id).tokens)
    assert issued[1]["access_token"] != issued[0]["access_token"]  # refreshed (once: no reuse below)
    leaked = invoke(api, tool_id, "leak_token")
    assert leaked["success"] and "you sent me ********" in leaked["text"], leaked
    stats = invoke(api, tool_id, "stats")
    assert '"reuse_detected": 0' in stats["text"], stats["text"]
    # Nothing issued leaks into answers or the audit log.
    audit = str(list(ToolCall.objects.values()))
    for tokens in issued:
        for token in tokens.values():
            assert token not in audit and all(token not in str(r) for r in results)


def test_a_revoked_grant_asks_for_authorization_and_trips_no_breaker(api: Any, member_client: Any, tenant: Any,
                                                                    server_url: str) -> None:
    from tools_app.models import Tool
    from tools_app.runtime.mcp import oauth
    from tools_app.wiring.http import outbound_policy
    from tools_app.wiring.tokens import client_of as _client
    from tools_app.wiring.tokens import discovery_of as _discovery

    tool_id = make_tool(api, server_url, name="revoked")
    connect_shared(api, tool_id)
    assert api.post(f"/api/v1/tools/{tool_id}/refresh/").status_code == 200
    connection = OAuthConnection.objects.get(tool_id=tool_id)
    assert oauth.revoke(_discovery(connection.discovery), _client(connection.registration),
                        token=connection.tokens["refresh_token"], hint="refresh_token",
                        policy=outbound_policy())
    expired_everywhere(server_url, tool_id)
    for _ in range(4):
        answer = invoke(api, tool_id, "whoami")
        assert answer["error_code"] == "AUTHORIZATION_REQUIRED", answer
        # No upstream status in the message (the connect link's path holds the tool id, which may be 4015).
        assert not re.search(r"(?<![/\d])401(?![/\d])", answer["error"] or ""), answer["error"]
        assert answer["authorize_url"].startswith("http://testserver/oauth/start/")
    member = member_client(tenant, Role.MEMBER)  # may not connect the shared account: no link
    refused = invoke(member, tool_id, "whoami")
    assert refused["error_code"] == "AUTHORIZATION_REQUIRED" and refused["authorize_url"] is None
    connection.refresh_from_db()
    assert connection.status == "needs_authorization" and connection.tokens is None
    tool = Tool.objects.get(pk=tool_id)
    assert tool.consecutive_failures == 0 and tool.disabled_until is None


def test_detail_shows_the_callers_view_and_disconnect_revokes(api: Any, member_client: Any, tenant: Any,
                                                              server_url: str) -> None:
    tool_id = make_tool(api, server_url, name="detailed")
    assert api.get(f"/api/v1/tools/{tool_id}/").json()["oauth"] == {
        "type": "oauth2", "per_user": False, "connected": False, "status": "not_connected", "scopes": [],
        "expires_at": None}
    connect_shared(api, tool_id)
    tokens = OAuthConnection.objects.get(tool_id=tool_id).tokens
    detail = api.get(f"/api/v1/tools/{tool_id}/")
    block = detail.json()["oauth"]
    assert block["connected"] is True and block["status"] == "connected" and block["scopes"] == ["read"]
    assert block["expires_at"]
    assert all(t not in detail.content.decode() for t in tokens.values())
    member = member_client(tenant, Role.MEMBER)
    assert member.delete(f"/api/v1/tools/{tool_id}/oauth/").status_code == 403
    assert api.delete(f"/api/v1/tools/{tool_id}/oauth/").status_code == 204
    assert not OAuthConnection.objects.filter(tool_id=tool_id).exists()
    assert api.get(f"/api/v1/tools/{tool_id}/").json()["oauth"]["connected"] is False
    # Revoked upstream too: the refresh token no longer works at the provider.
    from tools_app.runtime.mcp import oauth
    from tools_app.wiring.http import outbound_policy
    from tools_app.wiring.tokens import client_of as _client

    registration = OAuthRegistration.objects.get()
    found = oauth.discover(server_url, outbound_policy())
    with pytest.raises(oauth.GrantInvalid):
        oauth.refresh(found, _client(registration), refresh_token=tokens["refresh_token"],
                      policy=outbound_policy())
    plain = api.post("/api/v1/tools/", {"name": "plain", "type": "REMOTE", "config": {"url": server_url}},
                     format="json").json()["id"]
    assert api.get(f"/api/v1/tools/{plain}/").json()["oauth"] is None


@pytest.fixture(scope="module")
def another_url() -> Iterator[str]:
    with http_server(OAUTH_SERVER, extra_args=("--access-ttl", "60")) as url:
        yield url


def test_tokens_never_follow_the_tool_to_another_url(api: Any, server_url: str, another_url: str) -> None:
    tool_id = make_tool(api, server_url, name="moved")
    connect_shared(api, tool_id)
    assert api.post(f"/api/v1/tools/{tool_id}/refresh/").status_code == 200
    moved = api.patch(f"/api/v1/tools/{tool_id}/", {"config": {"url": another_url, "auth": {"type": "oauth2"}}},
                      format="json")
    assert moved.status_code == 200, moved.content
    answer = invoke(api, tool_id, "whoami")
    assert answer["error_code"] == "AUTHORIZATION_REQUIRED", answer
    assert OAuthConnection.objects.get(tool_id=tool_id).status == "needs_authorization"
