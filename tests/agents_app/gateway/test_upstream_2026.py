"""A 2026-07-28-only upstream behind the gateway: its input requests (`input_required`) reach the gateway client that
declared elicitation, and the client's answer reaches the upstream; without the capability the call ends with the
reason. The upstream is tests/fixtures/mcp_servers/modern_only.py over stdio."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any
from urllib.parse import quote

import mcp_types as types
import pytest

from tenants_app.models import Role
from tenants_app.services import token_for_user
from tests.agents_app.gateway.clients import connect
from tests.agents_app.support import make_agent
from tests.fixtures.mcp_servers import MODERN_ONLY

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def modern_agent(transactional_db: Any, tenant: Any, member_client: Any) -> tuple[int, str]:
    api = member_client(tenant, Role.ADMIN)
    resp = api.post("/api/v1/tools/", {"name": "modern", "type": "LOCAL", "config": {
        "command": sys.executable, "args": [str(MODERN_ONLY)], "call_timeout_s": 20}}, format="json")
    tool_id = int(resp.json()["id"])
    assert api.post(f"/api/v1/tools/{tool_id}/refresh/").json()["protocol_version"] == "2026-07-28"
    agent_id = make_agent(api, model=None, tools=[{"tool": tool_id}], name="booker")
    return agent_id, token_for_user(user=api.user)


def test_a_2026_upstreams_question_reaches_the_gateway_client(served: Any, modern_agent: tuple[int, str]) -> None:
    agent_id, token = modern_agent
    asked: list[Any] = []

    async def on_elicit(context: Any, params: Any) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"people": 2})

    async def scenario(**callbacks: Any) -> Any:
        async with connect(served.endpoint("acme", agent_id), token, **callbacks) as (session, _):
            return await session.call_tool("modern__book_table", {"restaurant": "Chez Ada"})

    answered = asyncio.run(scenario(elicitation_callback=on_elicit))
    assert [p.message for p in asked] == ["How many people for Chez Ada?"]
    assert not answered.is_error, answered
    assert json.loads(answered.content[0].text) == {"booked": True, "restaurant": "Chez Ada", "people": 2}

    unasked = asyncio.run(scenario())
    assert unasked.is_error and "How many people" not in unasked.content[0].text
    assert len(asked) == 1


def test_a_2026_upstreams_question_reaches_a_2026_gateway_client(served: Any, modern_agent: tuple[int, str]) -> None:
    """Both ends 2026-07-28: the upstream's input request rides the gateway's own input_required result
    (agents_app.gateway.relay) and the client's answer goes back upstream."""
    from tests.agents_app.gateway.modern import client

    agent_id, token = modern_agent
    asked: list[Any] = []

    async def on_elicit(context: Any, params: Any) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"people": 3})

    async def scenario() -> Any:
        async with client(served.endpoint("acme", agent_id), token, elicitation_callback=on_elicit) as connected:
            assert connected.protocol_version == "2026-07-28"
            return await connected.call_tool("modern__book_table", {"restaurant": "Chez Ada"})

    answered = asyncio.run(scenario())
    assert [p.message for p in asked] == ["How many people for Chez Ada?"]
    assert not answered.is_error, answered
    assert json.loads(answered.content[0].text) == {"booked": True, "restaurant": "Chez Ada", "people": 3}


PROMPT = "modern__booking"
RESOURCE = "toolhub://modern/" + quote("booking://table", safe="")


@pytest.mark.parametrize("era", ["2025", "2026"])
def test_a_2026_upstreams_question_in_a_prompt_or_resource_reaches_the_gateway_client(
        served: Any, modern_agent: tuple[int, str], era: str) -> None:
    """prompts/get and resources/read of an upstream that answers input_required: the question reaches the gateway
    client of either era (a 2025 client by elicitation, a 2026 one as the gateway's own input request), and the
    answer reaches the upstream."""
    from tests.agents_app.gateway.modern import client

    agent_id, token = modern_agent
    asked: list[str] = []

    async def on_elicit(context: Any, params: Any) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"people": 5})

    async def scenario() -> tuple[Any, Any]:
        url = served.endpoint("acme", agent_id)
        if era == "2025":
            async with connect(url, token, elicitation_callback=on_elicit) as (session, _):
                return await session.get_prompt(PROMPT, {}), await session.read_resource(RESOURCE)
        async with client(url, token, elicitation_callback=on_elicit) as connected:
            assert connected.protocol_version == "2026-07-28"
            return await connected.get_prompt(PROMPT, {}), await connected.read_resource(RESOURCE)

    prompt, resource = asyncio.run(scenario())
    assert asked == ["How many people for the booking?"] * 2
    assert prompt.messages[0].content.text == "Book a table for 5."
    assert resource.contents[0].text == "table for 5"


def test_without_elicitation_a_prompts_question_fails_it_with_the_reason(served: Any,
                                                                       modern_agent: tuple[int, str]) -> None:
    agent_id, token = modern_agent

    async def scenario() -> Any:
        async with connect(served.endpoint("acme", agent_id), token) as (session, _):
            try:
                await session.get_prompt(PROMPT, {})
            except Exception as exc:  # noqa: BLE001 - the SDK raises the JSON-RPC error
                return exc
        raise AssertionError("answered without anyone answering the question")

    error = asyncio.run(scenario())
    assert "did not declare elicitation" in str(error)
