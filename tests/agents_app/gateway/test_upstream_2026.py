"""A 2026-07-28-only upstream behind the gateway: its input requests (`input_required`) reach the gateway client that
declared elicitation, and the client's answer reaches the upstream; without the capability the call ends with the
reason. The upstream is tests/fixtures/mcp_servers/modern_mini.py over stdio: modern_only.py's answers without the
SDK (what is tested is the gateway's side; test_modern_mini.py compares the two)."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any
from urllib.parse import quote

import mcp_types as types
import pytest

from tenants_app.models import Role
from tenants_app.services import token_for_user
from tests.agents_app.gateway.clients import connect
from tests.agents_app.gateway.warm import discovery_kept_for_calls
from tests.agents_app.support import make_agent
from tests.fixtures.mcp_servers import MODERN_MINI

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def modern_agent(transactional_db: Any, tenant: Any, member_client: Any) -> tuple[int, str]:
    api = member_client(tenant, Role.ADMIN)
    resp = api.post("/api/v1/tools/", {"name": "modern", "type": "LOCAL", "config": {
        "command": sys.executable, "args": [str(MODERN_MINI)], "call_timeout_s": 20}}, format="json")
    tool_id = int(resp.json()["id"])
    with discovery_kept_for_calls():  # the calls reuse the server the discovery started
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


# --- a 2026 upstream's question across gateway processes: its state rides the gateway's sealed requestState --------

BOOK = ("modern__book_table", {"restaurant": "Chez Ada"})


async def _by_hand(url: str, token: str, name: str, arguments: dict[str, Any],
                   responses: dict[str, Any] | None = None, state: str | None = None) -> Any:
    """One round, driven by hand (the SDK's client would answer and retry on its own): the result, the input
    request, or the refusal (returned: raised, it would leave the client's task group as a group)."""
    from mcp.shared.exceptions import MCPError

    from tests.agents_app.gateway.modern import client

    async def on_elicit(context: Any, params: Any) -> types.ElicitResult:
        raise AssertionError("driven by hand")

    async with client(url, token, elicitation_callback=on_elicit) as connected:
        try:
            return await connected.session.call_tool(name, arguments, input_responses=responses, request_state=state,
                                                     allow_input_required=True)
        except MCPError as refused:
            return refused


def _booked(url: str, token: str) -> int:
    done = asyncio.run(_by_hand(url, token, "modern__bookings", {}))
    assert isinstance(done, types.CallToolResult) and not done.is_error, done
    return int(done.structured_content["booked"])


def _people(first: types.InputRequiredResult, count: int) -> dict[str, Any]:
    """The answer to each question of `first`, under the upstream's own keys."""
    return {key: types.ElicitResult(action="accept", content={"people": count}) for key in first.input_requests or {}}


def _asked(first: Any) -> list[str]:
    """The messages of an input_required result's questions."""
    return [request.params.message for request in first.input_requests.values()]


def _text(result: Any) -> str:
    return str(result.content[0].text)


def test_a_2026_upstreams_question_asked_on_one_gateway_is_answered_on_another(
        served_pair: Any, modern_agent: tuple[int, str], monkeypatch: Any) -> None:
    """First round on gateway A, the client's retry with its answer on gateway B: B re-issues the upstream call
    with the answer and the upstream's own requestState, sealed inside the gateway's; the table is booked once.
    A tampered, another call's or an expired state is refused typed and books nothing."""
    from mcp.server import request_state
    from mcp.shared.exceptions import MCPError

    agent_id, token = modern_agent
    url_a, url_b = (s.endpoint("acme", agent_id) for s in served_pair)
    before = _booked(url_a, token)

    first = asyncio.run(_by_hand(url_a, token, *BOOK))
    assert isinstance(first, types.InputRequiredResult), first
    assert _asked(first) == ["How many people for Chez Ada?"]
    state = first.request_state or ""
    assert "upstream" not in state and "Chez" not in state  # sealed: the client reads nothing of it

    flipped = state[:-3] + ("A" if state[-3] != "A" else "B") + state[-2:]
    for bad, arguments in ((flipped, BOOK[1]), (state, {"restaurant": "Chez Bob"})):
        refused = asyncio.run(_by_hand(url_b, token, BOOK[0], arguments, _people(first, 2), bad))
        assert isinstance(refused, MCPError) and refused.error.data["code"] == "invalid_request_state", refused
    class Later:
        @staticmethod
        def time() -> float:
            return time.time() + 3600  # past TOOLHUB_MCP_REQUEST_STATE_TTL_S (900 s)

    with monkeypatch.context() as patched:
        patched.setattr(request_state, "time", Later)
        expired = asyncio.run(_by_hand(url_b, token, *BOOK, _people(first, 2), state))
    assert isinstance(expired, MCPError) and expired.error.data["code"] == "invalid_request_state", expired
    assert _booked(url_a, token) == before

    answered = asyncio.run(_by_hand(url_b, token, *BOOK, _people(first, 4), state))
    assert isinstance(answered, types.CallToolResult) and not answered.is_error, answered
    assert json.loads(_text(answered)) == {"booked": True, "restaurant": "Chez Ada", "people": 4}
    assert _booked(url_b, token) == before + 1


def test_the_round_cap_holds_across_gateways(served_pair: Any, modern_agent: tuple[int, str]) -> None:
    """The rounds a call took ride its sealed state: a server that asks forever is cut off at
    TOOLHUB_MCP_INPUT_ROUNDS whichever process each round lands on."""
    from django.conf import settings

    agent_id, token = modern_agent
    urls = [s.endpoint("acme", agent_id) for s in served_pair]
    state, responses = None, None
    for turn in range(int(settings.TOOLHUB_MCP_INPUT_ROUNDS) + 1):
        got = asyncio.run(_by_hand(urls[turn % 2], token, "modern__ask_forever", {}, responses, state))
        if not isinstance(got, types.InputRequiredResult):
            break
        state = got.request_state
        responses = {key: types.ElicitResult(action="accept", content={"ok": True})
                     for key in got.input_requests or {}}
    else:
        raise AssertionError("still asking past the round cap")
    assert turn == int(settings.TOOLHUB_MCP_INPUT_ROUNDS)
    assert isinstance(got, types.CallToolResult) and got.is_error and "more than" in _text(got), got


def test_a_2025_upstreams_question_is_answered_only_where_it_was_asked(served_pair: Any, tenant: Any,
                                                                      member_client: Any) -> None:
    """A 2025 upstream asks by a request on its session, held by the process that asked: a retry on another
    gateway is refused with a reason that says so; the one that asked takes the answer."""
    from mcp.shared.exceptions import MCPError

    from tests.fixtures.mcp_servers import CLIENT_PROBE

    api = member_client(tenant, Role.ADMIN)
    resp = api.post("/api/v1/tools/", {"name": "probe", "type": "LOCAL", "config": {
        "command": sys.executable, "args": [str(CLIENT_PROBE)], "call_timeout_s": 20}}, format="json")
    tool_id = int(resp.json()["id"])
    assert api.post(f"/api/v1/tools/{tool_id}/refresh/").status_code == 200
    agent_id = make_agent(api, model=None, tools=[{"tool": tool_id}], name="prober")
    token = token_for_user(user=api.user)
    url_a, url_b = (s.endpoint("acme", agent_id) for s in served_pair)
    call = ("probe__book_table", {"restaurant": "Chez Ada"})

    first = asyncio.run(_by_hand(url_a, token, *call))
    assert isinstance(first, types.InputRequiredResult), first
    answer = {key: types.ElicitResult(action="accept", content={"people": 2}) for key in first.input_requests or {}}
    elsewhere = asyncio.run(_by_hand(url_b, token, *call, answer, first.request_state))
    assert isinstance(elsewhere, MCPError), elsewhere
    assert elsewhere.error.data == {"code": "invalid_request_state", "reason": "upstream_session_bound"}
    assert "MCP 2025" in elsewhere.error.message
    here = asyncio.run(_by_hand(url_a, token, *call, answer, first.request_state))
    assert isinstance(here, types.CallToolResult) and not here.is_error, here


def test_a_2026_upstreams_question_in_a_prompt_or_resource_is_answered_on_another_gateway(
        served_pair: Any, modern_agent: tuple[int, str]) -> None:
    from tests.agents_app.gateway.modern import client

    agent_id, token = modern_agent
    url_a, url_b = (s.endpoint("acme", agent_id) for s in served_pair)

    async def by_hand(url: str, kind: str, responses: Any = None, state: str | None = None) -> Any:
        async def on_elicit(context: Any, params: Any) -> types.ElicitResult:
            raise AssertionError("driven by hand")

        async with client(url, token, elicitation_callback=on_elicit) as connected:
            if kind == "prompt":
                return await connected.session.get_prompt(PROMPT, {}, input_responses=responses, request_state=state,
                                                          allow_input_required=True)
            return await connected.session.read_resource(RESOURCE, input_responses=responses, request_state=state,
                                                         allow_input_required=True)

    for kind in ("prompt", "resource"):
        first = asyncio.run(by_hand(url_a, kind))
        assert isinstance(first, types.InputRequiredResult), first
        assert _asked(first) == ["How many people for the booking?"]
        answered = asyncio.run(by_hand(url_b, kind, _people(first, 7), first.request_state))
        if kind == "prompt":
            assert answered.messages[0].content.text == "Book a table for 7."
        else:
            assert answered.contents[0].text == "table for 7"


def test_a_2026_upstreams_round_is_not_resumed_once_its_tool_changed(served_pair: Any, tenant: Any,
                                                                     member_client: Any,
                                                                     modern_agent: tuple[int, str]) -> None:
    """The upstream's state belongs to the tool revision whose server asked: after a config change the retry is
    refused (`tool_changed`)."""
    from mcp.shared.exceptions import MCPError

    from tools_app.models import Tool

    agent_id, token = modern_agent
    url_a, url_b = (s.endpoint("acme", agent_id) for s in served_pair)
    first = asyncio.run(_by_hand(url_a, token, *BOOK))
    assert isinstance(first, types.InputRequiredResult), first
    tool = Tool.objects.get(name="modern")
    api = member_client(tenant, Role.ADMIN)
    resp = api.patch(f"/api/v1/tools/{tool.pk}/", {"config": {**tool.config, "call_timeout_s": 21}}, format="json")
    assert resp.status_code == 200, resp.content
    refused = asyncio.run(_by_hand(url_b, token, *BOOK, _people(first, 2), first.request_state))
    assert isinstance(refused, MCPError), refused
    assert refused.error.data == {"code": "invalid_request_state", "reason": "tool_changed"}
