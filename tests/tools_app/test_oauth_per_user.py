"""Per-user OAuth connections: each member connects their own account and their calls act as them upstream."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tenants_app.models import Role
from tests.fixtures.mcp_servers import OAUTH_SERVER, http_server
from tests.tools_app.test_oauth_connections import invoke, make_tool, provider_answer, signed_in
from tools_app.models import OAuthConnection, Tool, ToolCall

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    with http_server(OAUTH_SERVER, extra_args=("--access-ttl", "60")) as url:
        yield url


def connect_as(client: Any, tool_id: int, provider_user: str) -> None:
    """The member asks for their link, signs in to the provider as `provider_user`, and comes back."""
    resp = client.post(f"/api/v1/tools/{tool_id}/oauth/connect/")
    assert resp.status_code == 200, resp.content
    browser = signed_in(client.user)
    query = provider_answer(browser, resp.json()["authorize_url"], user=provider_user)
    done = browser.get("/oauth/callback/", query, follow=True)
    assert done.status_code == 200, done.content.decode()[:500]
    assert "your own account" in done.content.decode()


def test_each_member_connects_and_calls_as_themselves(api: Any, member_client: Any, tenant: Any,
                                                      server_url: str) -> None:
    tool_id = make_tool(api, server_url, per_user=True, name="notion")
    connect_as(api, tool_id, "alice")
    # The first connection also discovered the tool's functions, as the member who connected.
    assert Tool.objects.get(pk=tool_id).functions.filter(name="whoami").exists()
    assert invoke(api, tool_id, "whoami")["text"] == "alice"

    bob = member_client(tenant, Role.MEMBER)
    assert bob.get(f"/api/v1/tools/{tool_id}/").json()["oauth"]["connected"] is False
    refused = invoke(bob, tool_id, "whoami")
    assert refused["error_code"] == "AUTHORIZATION_REQUIRED", refused
    assert "your own account" in refused["error"]
    # Bob's own link (a member may connect their own account), never alice's connection.
    assert refused["authorize_url"].startswith("http://testserver/oauth/start/")
    assert Tool.objects.get(pk=tool_id).consecutive_failures == 0

    connect_as(bob, tool_id, "bob")
    assert bob.get(f"/api/v1/tools/{tool_id}/").json()["oauth"]["connected"] is True
    for _ in range(2):  # each in their own session, interleaved
        assert invoke(bob, tool_id, "whoami")["text"] == "bob"
        assert invoke(api, tool_id, "whoami")["text"] == "alice"
    assert OAuthConnection.objects.filter(tool_id=tool_id).count() == 2

    # Bob disconnects his own; alice's stays.
    assert bob.delete(f"/api/v1/tools/{tool_id}/oauth/").status_code == 204
    assert invoke(bob, tool_id, "whoami")["error_code"] == "AUTHORIZATION_REQUIRED"
    assert invoke(api, tool_id, "whoami")["text"] == "alice"
    assert list(OAuthConnection.objects.filter(tool_id=tool_id).values_list("user_id", flat=True)) == [api.user.pk]
    # Nobody's tokens in the audit.
    audit = str(list(ToolCall.objects.values()))
    for tokens in OAuthConnection.objects.values_list("tokens", flat=True):
        assert tokens is not None
        assert all(token not in audit for token in tokens.values())


def test_a_viewer_cannot_connect_and_a_shared_tool_stays_for_admins(api: Any, member_client: Any, tenant: Any,
                                                                   server_url: str) -> None:
    personal = make_tool(api, server_url, per_user=True, name="personal")
    viewer = member_client(tenant, Role.VIEWER)
    assert viewer.post(f"/api/v1/tools/{personal}/oauth/connect/").status_code == 403
    shared = make_tool(api, server_url, name="shared")
    member = member_client(tenant, Role.MEMBER)
    refused = member.post(f"/api/v1/tools/{shared}/oauth/connect/")
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "permission_denied"
    assert member.delete(f"/api/v1/tools/{shared}/oauth/").status_code == 403


def test_a_member_connects_from_their_connections_page(api: Any, member_client: Any, tenant: Any,
                                                       server_url: str) -> None:
    tool_id = make_tool(api, server_url, per_user=True, name="figma")
    make_tool(api, server_url, name="shared-linear")
    bob = member_client(tenant, Role.MEMBER)
    browser = signed_in(bob.user)
    html = browser.get("/connections/?tenant=acme").content.decode()
    assert "figma" in html and "your own" in html and "shared-linear" in html and "an admin connects it" in html
    started = browser.post("/connections/?tenant=acme", {"action": "connect", "tool": tool_id})
    assert started.status_code == 302 and "/oauth/start/" in started["Location"]
    query = provider_answer(browser, started["Location"], user="bob")
    done = browser.get("/oauth/callback/", query, follow=True)
    assert done.status_code == 200 and 'href="/connections/?tenant=acme"' in done.content.decode()
    assert invoke(bob, tool_id, "whoami")["text"] == "bob"
    html = browser.get("/connections/?tenant=acme").content.decode()
    assert "Disconnect" in html and "connected" in html
    browser.post("/connections/?tenant=acme", {"action": "disconnect", "tool": tool_id})
    assert not OAuthConnection.objects.filter(tool_id=tool_id, user=bob.user).exists()


@pytest.fixture(scope="module")
def cimd_url() -> Iterator[str]:
    with http_server(OAUTH_SERVER, extra_args=("--access-ttl", "60", "--cimd")) as url:
        yield url


def test_a_server_taking_client_metadata_documents_gets_toolhubs_url_as_client_id(api: Any, cimd_url: str,
                                                                                  settings: Any) -> None:
    """With an https public URL and a server that takes Client ID Metadata Documents, Toolhub registers nothing:
    its document's URL is the client id, and the document is served there."""
    from tests.tools_app.runtime.mcp.test_oauth_client import browse
    from tools_app.models import OAuthRegistration

    settings.TOOLHUB_PUBLIC_URL = "https://toolhub.example"
    document = signed_in(api.user).get("/oauth/client-metadata.json")
    assert document.status_code == 200 and document.json() == {
        "client_id": "https://toolhub.example/oauth/client-metadata.json", "client_name": "Toolhub",
        "client_uri": "https://toolhub.example/", "redirect_uris": ["https://toolhub.example/oauth/callback/"],
        "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"],
        "token_endpoint_auth_method": "none", "application_type": "web"}
    tool_id = make_tool(api, cimd_url, name="cimd")
    link = api.post(f"/api/v1/tools/{tool_id}/oauth/connect/").json()["authorize_url"]
    assert link.startswith("https://toolhub.example/oauth/start/")
    browser = signed_in(api.user)
    started = browser.get(link.removeprefix("https://toolhub.example"))
    assert "client_id=https%3A%2F%2Ftoolhub.example%2Foauth%2Fclient-metadata.json" in started["Location"]
    query = {k: v[0] for k, v in browse(started["Location"], "alice",
                                        callback="https://toolhub.example/oauth/callback/").items()}
    assert browser.get("/oauth/callback/", query, follow=True).status_code == 200
    assert invoke(api, tool_id, "whoami")["text"] == "alice"
    registration = OAuthRegistration.objects.get()
    assert registration.client_id == "https://toolhub.example/oauth/client-metadata.json"
    stats = invoke(api, tool_id, "stats")["text"]
    assert '"registrations": 0' in stats, stats  # no Dynamic Client Registration happened
    # Without an https public URL there is no document (and servers get a registered client instead).
    settings.TOOLHUB_PUBLIC_URL = ""
    assert signed_in(api.user).get("/oauth/client-metadata.json").status_code == 404
