"""Any MCP client signs in: the mcp SDK's OAuthClientProvider against a real Toolhub on 127.0.0.1 discovers the
authorization server from the 401, registers itself, sends a scripted person through sign-in and consent, and
calls the agent as that member; the token it gets is bound to that one agent."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import httpx2
import pytest
from django.core import serializers
from mcp.client.session import ClientSession
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from oauth2_provider.models import AccessToken, Application, Grant, RefreshToken

from tests import loopback
from tests.agents_app.gateway.clients import refusal, sse_http_client
from tests.agents_app.gateway.oauth_support import CLIENT_NAME, Browser, MemoryStorage, provider
from tests.agents_app.support import make_agent
from tools_app.models import Approval, ToolCall

pytestmark = pytest.mark.django_db(transaction=True)

MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "probe", "version": "1"}}}


async def _session_run(url: str, browser: Browser, storage: MemoryStorage, *, transport: str = "streamable_http",
                       call: tuple[str, dict[str, Any]] | None = None) -> tuple[Any, Any]:
    auth = provider(url, browser, storage)
    if transport == "sse":
        async with sse_client(url.rstrip("/") + "/sse", auth=auth, httpx_client_factory=sse_http_client) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                tools = await session.list_tools()
                result = await session.call_tool(*call) if call else None
                return tools, result
    async with loopback.async_client(auth=auth, timeout=httpx2.Timeout(30, read=120)) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                tools = await session.list_tools()
                result = await session.call_tool(*call) if call else None
                return tools, result


def run_client(url: str, username: str, *, transport: str = "streamable_http",
               call: tuple[str, dict[str, Any]] | None = None) -> tuple[Any, Any, MemoryStorage, Browser]:
    storage = MemoryStorage()
    browser = Browser(username)

    async def scenario() -> tuple[Any, Any]:
        try:
            return await _session_run(url, browser, storage, transport=transport, call=call)
        finally:
            await browser.close()

    tools, result = asyncio.run(scenario())
    return tools, result, storage, browser


def _bearer(token: str) -> dict[str, str]:
    return {**MCP_HEADERS, "Authorization": f"Bearer {token}"}


def test_the_sdk_signs_in_consents_and_calls_the_agent_as_the_member(
    served: Any, setup: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    user = setup.api.user
    url = served.endpoint("acme", setup.agent_id)
    tools, result, storage, browser = run_client(url, user.username,
                                                 call=("inventory__get_inventory", {"sku": "DEMO-001"}))

    assert "inventory__get_inventory" in [t.name for t in tools.tools]
    assert not result.is_error and "DEMO-001" in result.content[0].text
    # The consent page named the client, the tenant and the agent.
    (page,) = browser.consent_pages
    assert CLIENT_NAME in page and setup.tenant.name in page and ">helper<" in page
    call = ToolCall.objects.get(function="get_inventory")
    assert (call.via, call.client, call.actor_id, call.agent_id) == ("gateway", CLIENT_NAME, user.pk, setup.agent_id)

    # One public client registered, one token for this agent, for this member.
    app = Application.objects.get()
    assert (app.name, app.client_type, app.authorization_grant_type) == (CLIENT_NAME, "public", "authorization-code")
    token = AccessToken.objects.get(user=user)
    assert token.resource == [url] and token.scope == "mcp"

    # Nothing issued is kept in the clear, logged or audited.
    assert storage.tokens is not None and storage.tokens.refresh_token
    issued = [storage.tokens.access_token, storage.tokens.refresh_token]
    stored = serializers.serialize("json", [*AccessToken.objects.all(), *RefreshToken.objects.all(), *Grant.objects.all(),
                                            *ToolCall.objects.all()])
    logged = "\n".join(r.getMessage() + json.dumps(r.args, default=str) for r in caplog.records)
    assert caplog.records  # the server's request logging was captured, so the check below means something
    for secret in issued:
        assert secret not in stored
        assert secret not in logged


def test_the_sse_transport_signs_in_the_same_way(served: Any, setup: Any) -> None:
    url = served.endpoint("acme", setup.agent_id)
    tools, _, storage, _ = run_client(url, setup.api.user.username, transport="sse")
    assert "inventory__get_inventory" in [t.name for t in tools.tools]
    # The /sse variant shares its agent's resource: the token is bound to the agent's URL.
    assert AccessToken.objects.get(user=setup.api.user).resource == [url]
    assert storage.tokens is not None


def test_a_token_for_agent_a_is_refused_at_agent_b_and_at_the_management_api(served: Any, setup: Any) -> None:
    other = make_agent(setup.api, model=None, tools=[{"tool": setup.tool_id}], name="other")
    url_a = served.endpoint("acme", setup.agent_id)
    _, _, storage, _ = run_client(url_a, setup.api.user.username)
    assert storage.tokens is not None
    token = storage.tokens.access_token

    assert loopback.post(url_a, json=INIT, headers=_bearer(token)).status_code == 200
    at_b = loopback.post(served.endpoint("acme", other), json=INIT, headers=_bearer(token))
    assert at_b.status_code == 401
    assert 'error="invalid_token"' in at_b.headers["www-authenticate"]
    assert f"/mcp/acme/agents/{other}/" in at_b.headers["www-authenticate"]
    for scheme in ("Bearer", "Token"):
        api = loopback.get(f"{served.base_url}/api/v1/agents/", headers={"Authorization": f"{scheme} {token}",
                                                                         "X-Tenant": "acme"})
        assert api.status_code in (401, 403)
        assert api.json()["error"]["code"] in ("not_authenticated", "authentication_failed")


def test_a_viewer_lists_but_cannot_call(served: Any, setup: Any, member_client: Any) -> None:
    from tenants_app.models import Role

    viewer = member_client(setup.tenant, Role.VIEWER)
    tools, result, _, _ = run_client(served.endpoint("acme", setup.agent_id), viewer.user.username,
                                     call=("inventory__get_inventory", {"sku": "DEMO-001"}))
    assert "inventory__get_inventory" in [t.name for t in tools.tools]
    assert result.is_error
    assert refusal(result)["error_reason"] == "viewer_may_not_call"
    assert not ToolCall.objects.filter(status="ok").exists()  # nothing ran


def test_the_audit_api_names_the_client(served: Any, setup: Any) -> None:
    run_client(served.endpoint("acme", setup.agent_id), setup.api.user.username,
               call=("inventory__get_inventory", {"sku": "DEMO-001"}))
    rows = setup.api.get("/api/v1/tool-calls/?status=ok").json()["results"]
    assert [(r["function"], r["via"], r["client"]) for r in rows] == [("get_inventory", "gateway", CLIENT_NAME)]


def test_a_call_held_for_approval_names_the_client_on_its_audit_row(served: Any, setup: Any) -> None:
    resp = setup.api.patch(f"/api/v1/tools/{setup.tool_id}/functions/get_inventory/", {"requires_approval": True},
                           format="json")
    assert resp.status_code == 200, resp.content
    _, result, _, _ = run_client(served.endpoint("acme", setup.agent_id), setup.api.user.username,
                                 call=("inventory__get_inventory", {"sku": "DEMO-001"}))
    assert result.is_error and refusal(result)["error_code"] == "APPROVAL_REQUIRED"
    held = ToolCall.objects.get(function="get_inventory")
    assert (held.status, held.via, held.client) == ("awaiting_approval", "gateway", CLIENT_NAME)
    # Approved, the call runs at once; its audit row names the same client as the held one.
    approval = Approval.objects.get(tool_call=held)
    decided = setup.api.post(f"/api/v1/approvals/{approval.pk}/approve/")
    assert decided.status_code == 200, decided.content
    ran = ToolCall.objects.exclude(pk=held.pk).get(function="get_inventory")
    assert (ran.status, ran.via, ran.client) == ("ok", "gateway", CLIENT_NAME)
