"""The Django-free OAuth client against a real OAuth-protected MCP server (the mcp SDK's own server auth)."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import parse_qs, urlparse

import pytest

from core.outbound import OutboundPolicy
from tests import loopback
from tests.fixtures.mcp_servers import OAUTH_SERVER, http_server
from tools_app.runtime.mcp import oauth

POLICY = OutboundPolicy.build("127.0.0.1/32", timeout_s=10)
REDIRECT = "http://toolhub.test/oauth/callback/"


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    with http_server(OAUTH_SERVER, extra_args=("--access-ttl", "60")) as url:
        yield url


def browse(authorize_url: str, user: str = "alice", callback: str = REDIRECT) -> dict[str, list[str]]:
    """What a browser does at the provider: follow its redirects (consent approves at once) to our callback."""
    url = authorize_url
    with loopback.client(follow_redirects=False) as http:
        for _ in range(5):
            answer = http.get(url)
            assert answer.status_code in (302, 307), answer.text
            url = answer.headers["location"]
            if url.startswith(callback):
                return parse_qs(urlparse(url).query)
            if "/consent" in url:
                url += f"&user={user}"
    raise AssertionError("never came back to the callback")


def test_discovery_registration_code_refresh_and_revocation(server_url: str) -> None:
    found = oauth.discover(server_url, POLICY)
    origin = server_url.rsplit("/mcp", 1)[0]
    assert found.resource == server_url and found.issuer.rstrip("/") == origin
    assert found.scopes_supported == ["read"]
    client = oauth.register(found, redirect_uri=REDIRECT, client_name="Toolhub", policy=POLICY)
    assert client.client_id
    verifier, challenge = oauth.new_pkce()
    link = oauth.authorize_url(found, client, redirect_uri=REDIRECT, state="st-1", code_challenge=challenge,
                               scopes=["read"])
    query = parse_qs(urlparse(link).query)
    assert query["code_challenge_method"] == ["S256"] and query["resource"] == [server_url]
    back = browse(link)
    assert back["state"] == ["st-1"]
    code = back["code"][0]
    with pytest.raises(oauth.GrantInvalid):  # the wrong verifier never gets a token
        oauth.exchange_code(found, client, code=code, code_verifier="x" * 64, redirect_uri=REDIRECT, policy=POLICY)
    # (the SDK's token handler refuses the PKCE mismatch before spending the code)
    tokens = oauth.exchange_code(found, client, code=code, code_verifier=verifier, redirect_uri=REDIRECT,
                                 policy=POLICY)
    assert tokens.access_token and tokens.refresh_token and tokens.expires_at
    with pytest.raises(oauth.GrantInvalid) as used:  # a code is good once
        oauth.exchange_code(found, client, code=code, code_verifier=verifier, redirect_uri=REDIRECT, policy=POLICY)
    assert code not in str(used.value) and verifier not in str(used.value)
    fresh = oauth.refresh(found, client, refresh_token=tokens.refresh_token, policy=POLICY)
    assert fresh.refresh_token != tokens.refresh_token and fresh.access_token != tokens.access_token
    with pytest.raises(oauth.GrantInvalid) as reused:  # presenting the spent one revokes the grant...
        oauth.refresh(found, client, refresh_token=tokens.refresh_token, policy=POLICY)
    assert tokens.refresh_token not in str(reused.value)
    with pytest.raises(oauth.GrantInvalid):  # ...so the rotated one is dead too
        oauth.refresh(found, client, refresh_token=fresh.refresh_token, policy=POLICY)


def test_revocation_ends_the_grant(server_url: str) -> None:
    found = oauth.discover(server_url, POLICY)
    client = oauth.register(found, redirect_uri=REDIRECT, client_name="Toolhub", policy=POLICY)
    verifier, challenge = oauth.new_pkce()
    back = browse(oauth.authorize_url(found, client, redirect_uri=REDIRECT, state="s", code_challenge=challenge,
                                      scopes=[]))
    tokens = oauth.exchange_code(found, client, code=back["code"][0], code_verifier=verifier, redirect_uri=REDIRECT,
                                 policy=POLICY)
    assert oauth.revoke(found, client, token=tokens.refresh_token, hint="refresh_token", policy=POLICY)
    with pytest.raises(oauth.GrantInvalid):
        oauth.refresh(found, client, refresh_token=tokens.refresh_token, policy=POLICY)


def test_a_server_without_oauth_is_named(server_url: str) -> None:
    with pytest.raises(oauth.OAuthFailed):
        oauth.discover("http://127.0.0.1:9/mcp", OutboundPolicy.build("127.0.0.1/32", timeout_s=2))
