"""A gateway call to an OAuth tool without a usable connection answers AUTHORIZATION_REQUIRED with the caller's own
connect link (typed in `_meta["toolhub/refusal"]` and in the text), never a raw 401."""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import urlsplit

import pytest

from tenants_app.models import Role
from tenants_app.services import token_for_user
from tests.agents_app.gateway.clients import connect, refusal
from tests.agents_app.support import make_agent
from tests.tools_app.test_oauth_connections import discovered_then_disconnected, server_url  # noqa: F401 - fixture
from tools_app.models import OAuthFlow

pytestmark = pytest.mark.django_db(transaction=True)


async def _call(url: str, token: str, name: str) -> Any:
    async with connect(url, token) as (session, _):
        return await session.call_tool(name, {})


def test_a_disconnected_oauth_tool_answers_with_the_callers_connect_link(served: Any, tenant: Any,
                                                                        member_client: Any, server_url: str) -> None:  # noqa: F811
    api = member_client(tenant, Role.ADMIN)
    tool_id, function = discovered_then_disconnected(api, server_url)
    agent_id = make_agent(api, model=None, tools=[{"tool": tool_id}], name="linear-agent")

    result = asyncio.run(_call(served.endpoint("acme", agent_id), token_for_user(user=api.user),
                               f"linear__{function}"))
    typed = refusal(result)
    assert result.is_error and typed["error_code"] == "AUTHORIZATION_REQUIRED"
    link = typed["authorize_url"]
    assert "/oauth/start/" in link and link in result.content[0].text
    flow = OAuthFlow.objects.get(pk=link.rstrip("/").rsplit("/", 1)[-1])
    assert flow.user_id == api.user.pk  # the caller's own link: nobody else can complete it


def test_a_client_that_opens_links_gets_the_spec_url_elicitation(served: Any, tenant: Any, member_client: Any,
                                                                 server_url: str) -> None:  # noqa: F811
    """A client declaring URL-mode elicitation (MCP 2025-11-25) gets -32042 with the caller's own link to open."""
    from mcp.shared.exceptions import MCPError, UrlElicitationRequiredError

    api = member_client(tenant, Role.ADMIN)
    tool_id, function = discovered_then_disconnected(api, server_url)
    agent_id = make_agent(api, model=None, tools=[{"tool": tool_id}], name="linear-agent")

    async def never(*_args: Any) -> Any:
        raise AssertionError("no form is asked for: the link is the answer")

    token = token_for_user(user=api.user)

    async def call() -> MCPError:
        async with connect(served.endpoint("acme", agent_id), token, elicitation_callback=never) as (session, _):
            with pytest.raises(MCPError) as raised:
                await session.call_tool(f"linear__{function}", {})
            return raised.value

    error = asyncio.run(call())
    assert error.error.code == -32042 and "AUTHORIZATION_REQUIRED" in error.error.message
    wanted = UrlElicitationRequiredError.from_error(error.error).elicitations
    assert len(wanted) == 1 and wanted[0].mode == "url" and "/oauth/start/" in wanted[0].url
    flow = OAuthFlow.objects.get(pk=wanted[0].url.rstrip("/").rsplit("/", 1)[-1])
    assert flow.user_id == api.user.pk and wanted[0].elicitation_id == f"toolhub-oauth-{flow.pk}"


def test_a_tool_without_the_callers_keys_names_their_page(served: Any, tenant: Any, member_client: Any) -> None:
    """CREDENTIALS_REQUIRED through the gateway: the typed error names the caller's connections page, and a
    client that opens links gets it as a URL elicitation."""
    import sys

    from mcp.shared.exceptions import MCPError, UrlElicitationRequiredError

    from tests.fixtures.mcp_servers import LEAKY

    api = member_client(tenant, Role.ADMIN)
    tool_id = api.post("/api/v1/tools/", {"name": "keyed", "type": "LOCAL", "config": {
        "command": sys.executable, "args": [str(LEAKY)], "user_secrets": ["LEAK"]}}, format="json").json()["id"]
    assert api.post(f"/api/v1/tools/{tool_id}/refresh/").json()["ok"]
    agent_id = make_agent(api, model=None, tools=[{"tool": tool_id}], name="keyed-agent")
    token = token_for_user(user=api.user)
    url = served.endpoint("acme", agent_id)

    result = asyncio.run(_call(url, token, "keyed__fingerprint"))
    typed = refusal(result)
    assert result.is_error and typed["error_code"] == "CREDENTIALS_REQUIRED"
    assert urlsplit(typed["connections_url"])[2:4] == ("/connections/", "tenant=acme")
    assert "LEAK" in result.content[0].text and typed["connections_url"] in result.content[0].text

    async def never(*_args: Any) -> Any:
        raise AssertionError("no form is asked for")

    async def call() -> MCPError:
        async with connect(url, token, elicitation_callback=never) as (session, _):
            with pytest.raises(MCPError) as raised:
                await session.call_tool("keyed__fingerprint", {})
            return raised.value

    error = asyncio.run(call())
    (wanted,) = UrlElicitationRequiredError.from_error(error.error).elicitations
    assert error.error.code == -32042 and wanted.url == typed["connections_url"]
