"""The gateway as an OAuth protected resource: the 401 names the agent's resource metadata (RFC 9728), which names
the agent's URL and Toolhub as its authorization server (RFC 8414); static API tokens keep working."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests import loopback
from tests.agents_app.gateway.clients import connect

pytestmark = pytest.mark.django_db(transaction=True)

MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "probe", "version": "1"}}}


def _param(header: str, name: str) -> str:
    for part in header.split(","):
        key, _, value = part.strip().partition("=")
        if key.strip().split()[-1] == name:
            return value.strip().strip('"')
    raise AssertionError(f"{name} not in {header!r}")


def test_a_request_without_a_token_names_the_agents_resource_metadata(served: Any, setup: Any) -> None:
    url = served.endpoint("acme", setup.agent_id)
    expected = f"{served.base_url}/.well-known/oauth-protected-resource/mcp/acme/agents/{setup.agent_id}/"
    missing = loopback.post(url, json=INIT, headers=MCP_HEADERS)
    sse = loopback.get(url + "sse")
    bad = loopback.post(url, json=INIT, headers={**MCP_HEADERS, "Authorization": "Bearer not-a-token"})
    for resp in (missing, sse, bad):
        assert resp.status_code == 401
        header = resp.headers["www-authenticate"]
        assert header.startswith("Bearer ")
        assert _param(header, "resource_metadata") == expected
    assert _param(bad.headers["www-authenticate"], "error") == "invalid_token"

    document = loopback.get(expected)
    assert document.status_code == 200
    prm = document.json()
    assert prm["resource"] == url
    assert prm["authorization_servers"] == [served.base_url]
    assert prm["scopes_supported"] == ["mcp"]
    # The SSE variant's document names the same resource: one agent, one token.
    assert loopback.get(expected + "sse").json()["resource"] == url


def test_the_authorization_server_metadata_offers_code_with_s256_and_registration(served: Any) -> None:
    resp = loopback.get(f"{served.base_url}/.well-known/oauth-authorization-server")
    assert resp.status_code == 200
    meta = resp.json()
    base = served.base_url
    assert meta["issuer"] == base
    assert meta["authorization_endpoint"] == f"{base}/oauth/authorize/"
    assert meta["token_endpoint"] == f"{base}/oauth/token/"
    assert meta["registration_endpoint"] == f"{base}/oauth/register/"
    assert meta["revocation_endpoint"] == f"{base}/oauth/revoke/"
    assert meta["code_challenge_methods_supported"] == ["S256"]
    assert meta["response_types_supported"] == ["code"]
    assert meta["grant_types_supported"] == ["authorization_code", "refresh_token"]
    assert meta["token_endpoint_auth_methods_supported"] == ["none"]
    # Another issuer path is not this server's document.
    assert loopback.get(f"{base}/.well-known/oauth-authorization-server/elsewhere").status_code == 404


def test_the_public_url_is_the_base_of_every_discovery_link(served: Any, setup: Any, settings: Any) -> None:
    settings.TOOLHUB_PUBLIC_URL = "https://hub.example.com"
    url = served.endpoint("acme", setup.agent_id)
    header = loopback.post(url, json=INIT, headers=MCP_HEADERS).headers["www-authenticate"]
    assert _param(header, "resource_metadata") == (
        f"https://hub.example.com/.well-known/oauth-protected-resource/mcp/acme/agents/{setup.agent_id}/")
    prm = loopback.get(f"{served.base_url}/.well-known/oauth-protected-resource/mcp/acme/agents/{setup.agent_id}/").json()
    assert prm["resource"] == f"https://hub.example.com/mcp/acme/agents/{setup.agent_id}/"
    assert prm["authorization_servers"] == ["https://hub.example.com"]


def test_static_api_tokens_keep_working(served: Any, setup: Any) -> None:
    async def scenario() -> Any:
        async with connect(served.endpoint("acme", setup.agent_id), setup.token) as (session, _):
            return await session.list_tools()

    assert "inventory__get_inventory" in [t.name for t in asyncio.run(scenario()).tools]


def test_an_issuer_with_a_path_is_served_at_the_path_insertion_form(served: Any, settings: Any) -> None:
    settings.TOOLHUB_PUBLIC_URL = "https://hub.example.com/base/"
    inserted = loopback.get(f"{served.base_url}/.well-known/oauth-authorization-server/base")
    assert inserted.status_code == 200
    meta = inserted.json()
    assert meta["issuer"] == "https://hub.example.com/base"
    assert meta["token_endpoint"] == "https://hub.example.com/base/oauth/token/"
    # Behind a proxy that strips the path, the root form answers the same document.
    assert loopback.get(f"{served.base_url}/.well-known/oauth-authorization-server").json() == meta
    assert loopback.get(f"{served.base_url}/.well-known/oauth-authorization-server/other").status_code == 404


def test_a_browser_client_may_discover_register_and_exchange_from_script(served: Any) -> None:
    """CORS on the machine endpoints (a web-based MCP client calls them from script; no cookies, any origin)."""
    base = served.base_url
    origin = {"Origin": "https://inspector.example"}
    for path in ("/.well-known/oauth-authorization-server", "/oauth/token/", "/oauth/register/", "/oauth/revoke/"):
        preflight = loopback.options(base + path, headers={**origin, "Access-Control-Request-Method": "POST",
                                                            "Access-Control-Request-Headers": "content-type"})
        assert preflight.status_code == 204, path
        assert preflight.headers["access-control-allow-origin"] == "*"
        assert "content-type" in preflight.headers["access-control-allow-headers"].lower()
        assert "access-control-allow-credentials" not in preflight.headers
    assert loopback.get(base + "/.well-known/oauth-authorization-server",
                        headers=origin).headers["access-control-allow-origin"] == "*"
    refused = loopback.post(base + "/oauth/token/", data={"grant_type": "authorization_code", "code": "nope"},
                            headers=origin)
    assert refused.status_code in (400, 401) and refused.headers["access-control-allow-origin"] == "*"
    # The sign-in and consent page is navigated to, never read from script.
    assert "access-control-allow-origin" not in loopback.get(base + "/oauth/authorize/", headers=origin).headers
