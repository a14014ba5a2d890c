"""A client through the gateway sees what a direct client sees: the same fixture server (tests/fixtures/
mcp_servers/fidelity.py), one direct SDK session over stdio and one through the gateway, compared field by field.

What Toolhub adds, and so may differ: names prefixed `<tool>__`; readOnlyHint/destructiveHint state Toolhub's
effective safety (what its approval rule uses); a title where the server gave none; secrets scrubbed.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from tenants_app.models import Role
from tenants_app.services import token_for_user
from tests.agents_app.gateway.clients import connect
from tests.agents_app.gateway.warm import discovery_kept_for_calls
from tests.agents_app.support import make_agent
from tests.fixtures.mcp_servers import HERE
from tools_app.models import ToolFunction

pytestmark = pytest.mark.django_db(transaction=True)

FIDELITY = HERE / "fidelity.py"
CALLS: list[tuple[str, dict[str, Any]]] = [("forecast", {"city": "Lyon"}), ("explode", {"why": "bad"}),
                                           ("bare", {})]
TOOLHUB_HINTS = {"readOnlyHint", "destructiveHint"}


@pytest.fixture
def weather(transactional_db: Any, tenant: Any, member_client: Any) -> Any:
    api = member_client(tenant, Role.ADMIN)
    resp = api.post("/api/v1/tools/", {"name": "weather", "type": "LOCAL", "config": {
        "command": sys.executable, "args": [str(FIDELITY)], "startup_timeout_s": 20, "call_timeout_s": 10,
        "sampling": True}},
        format="json")
    assert resp.status_code == 201, resp.content
    tool_id = int(resp.json()["id"])
    with discovery_kept_for_calls():  # the calls reuse the server the discovery started
        assert api.post(f"/api/v1/tools/{tool_id}/refresh/").json()["ok"]
    agent_id = make_agent(api, model=None, tools=[{"tool": tool_id}], name="forecaster")
    return api, tool_id, agent_id


async def _direct() -> tuple[Any, dict[str, Any]]:
    params = StdioServerParameters(command=sys.executable, args=[str(FIDELITY)])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        listed = await session.list_tools()
        return listed, {name: await session.call_tool(name, args) for name, args in CALLS}


async def _through(url: str, token: str) -> tuple[Any, dict[str, Any], Any]:
    async with connect(url, token) as (session, _):
        listed = await session.list_tools()
        results = {name: await session.call_tool(f"weather__{name}", args) for name, args in CALLS}
        refused = await session.call_tool("weather__forecast", {"city": "Lyon", "nope": 1})
        return listed, results, refused


def _wire(model: Any) -> dict[str, Any]:
    dumped: dict[str, Any] = model.model_dump(by_alias=True, mode="json", exclude_none=True)
    return dumped


def test_listing_and_results_match_a_direct_client_field_by_field(served: Any, weather: Any) -> None:
    api, _tool_id, agent_id = weather
    direct_list, direct_results = asyncio.run(_direct())
    via_list, via_results, refused = asyncio.run(_through(served.endpoint("acme", agent_id),
                                                          token_for_user(user=api.user)))

    via = {t.name: _wire(t) for t in via_list.tools}
    assert sorted(via) == sorted(f"weather__{t.name}" for t in direct_list.tools)
    for tool in direct_list.tools:
        mine, theirs = via[f"weather__{tool.name}"], _wire(tool)
        for key in ("description", "inputSchema", "outputSchema", "_meta", "icons"):
            assert mine.get(key) == theirs.get(key), (tool.name, key)
        if "title" in theirs:
            assert mine["title"] == theirs["title"], tool.name
        else:
            assert mine["title"] == f"weather: {tool.name}"  # Toolhub's title where the server gave none
        stated = theirs.get("annotations", {})
        for key, value in stated.items():  # every annotation the server stated arrives as stated ...
            assert mine["annotations"][key] == value, (tool.name, key)
        # ... and the only ones added are Toolhub's safety (what its approval rule uses) and a title.
        assert set(mine["annotations"]) - set(stated) <= TOOLHUB_HINTS | {"title"}

    for name, direct in direct_results.items():
        assert _wire(via_results[name]) == _wire(direct), name  # content, structuredContent, isError, _meta
    assert via_results["explode"].is_error and len(via_results["explode"].content) == 2
    assert via_results["explode"].content[0].text == "boom: bad"  # not "BUSINESS_ERROR: boom: bad"

    # Toolhub's own refusal stays typed.
    assert refused.is_error and refused.content[0].text.startswith("INVALID_PARAMS: ")


def test_discovery_stores_title_meta_and_icons(weather: Any) -> None:
    _api, tool_id, _agent_id = weather
    fn = ToolFunction.objects.get(tool_id=tool_id, name="forecast")
    assert fn.title == "Weather forecast"
    assert fn.meta == {"ui": {"resourceUri": "ui://fidelity/forecast-card"}, "io.example/owner": "weather-team"}
    assert fn.icons == [{"src": "https://example.com/sun.png", "mimeType": "image/png", "sizes": ["48x48"]}]
    assert fn.input_schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    bare = ToolFunction.objects.get(tool_id=tool_id, name="bare")
    assert (bare.title, bare.meta, bare.icons) == ("", None, None)


def test_the_invoke_body_keeps_the_result_meta(weather: Any) -> None:
    api, tool_id, _agent_id = weather
    body = api.post(f"/api/v1/tools/{tool_id}/invoke/", {"function": "forecast", "arguments": {"city": "Lyon"}},
                    format="json").json()
    assert body["success"] and body["data"] == {"city": "Lyon", "high_c": 21.5}
    assert body["meta"] == {"io.example/source": "model-run-42"}


async def _progress_direct() -> list[tuple[float, float | None, str | None]]:
    seen: list[tuple[float, float | None, str | None]] = []

    async def note(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    params = StdioServerParameters(command=sys.executable, args=[str(FIDELITY)])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        await session.call_tool("countdown", {}, progress_callback=note)
    return seen


async def _progress_through(url: str, token: str, transport: str) -> tuple[Any, list[Any]]:
    seen: list[tuple[float, float | None, str | None]] = []

    async def note(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with connect(url, token, transport=transport) as (session, _):
        result = await session.call_tool("weather__countdown", {}, progress_callback=note)
        quiet = await session.call_tool("weather__countdown", {})  # no progressToken: nothing is sent
    return (result, quiet), seen


@pytest.mark.parametrize("transport", ["streamable_http", "sse"])
def test_progress_reaches_a_gateway_client_as_it_reaches_a_direct_one(served: Any, weather: Any,
                                                                      transport: str) -> None:
    api, _tool_id, agent_id = weather
    direct = asyncio.run(_progress_direct())
    (result, quiet), via = asyncio.run(_progress_through(served.endpoint("acme", agent_id),
                                                         token_for_user(user=api.user), transport))
    assert direct == [(1.0, 3.0, "three"), (2.0, 3.0, "two"), (3.0, 3.0, "one")]
    assert via == direct
    assert not result.is_error and result.content[0].text == "lift-off"
    assert not quiet.is_error


async def _progress_modern(url: str, token: str) -> tuple[Any, list[Any]]:
    from tests.agents_app.gateway.modern import MODERN, client

    seen: list[tuple[float, float | None, str | None]] = []

    async def note(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with client(url, token, mode=MODERN) as connected:
        result = await connected.call_tool("weather__countdown", {}, progress_callback=note)
        quiet = await connected.call_tool("weather__countdown", {})  # no progressToken: the JSON answer, no stream
    return (result, quiet), seen


def test_progress_reaches_a_2026_gateway_client_as_it_reaches_a_direct_one(served: Any, weather: Any) -> None:
    # A 2026-07-28 request with a progressToken takes the SDK's streaming entry (gateway.transport.handle_modern),
    # one without takes its JSON-mode path: both answer the call the same.
    api, _tool_id, agent_id = weather
    (result, quiet), via = asyncio.run(_progress_modern(served.endpoint("acme", agent_id),
                                                       token_for_user(user=api.user)))
    assert via == [(1.0, 3.0, "three"), (2.0, 3.0, "two"), (3.0, 3.0, "one")]
    assert not result.is_error and result.content[0].text == "lift-off"
    assert not quiet.is_error and quiet.content[0].text == "lift-off"


async def _answer_elicit(context: Any, params: Any) -> Any:
    from mcp import types

    return types.ElicitResult(action="accept", content={"city": f"Lyon ({params.message})"})


async def _answer_sample(context: Any, params: Any) -> Any:
    from mcp import types

    said = params.messages[0].content.text
    return types.CreateMessageResult(role="assistant", model="client-model", stop_reason="endTurn",
                                     content=types.TextContent(type="text", text=f"Bonjour! ({said})"))


async def _asked_direct() -> dict[str, Any]:
    params = StdioServerParameters(command=sys.executable, args=[str(FIDELITY)])
    async with stdio_client(params) as (read, write), ClientSession(
            read, write, elicitation_callback=_answer_elicit, sampling_callback=_answer_sample) as session:
        await session.initialize()
        return {name: await session.call_tool(name, {}) for name in ("ask", "think")}


async def _asked_through(url: str, token: str, transport: str, answering: bool) -> dict[str, Any]:
    callbacks = {"elicitation_callback": _answer_elicit, "sampling_callback": _answer_sample} if answering else {}
    async with connect(url, token, transport=transport, **callbacks) as (session, _):
        return {name: await session.call_tool(f"weather__{name}", {}) for name in ("ask", "think")}


@pytest.mark.parametrize("transport", ["streamable_http", "sse"])
def test_the_servers_questions_and_sampling_reach_a_gateway_client_that_declared_them(served: Any, weather: Any,
                                                                                     transport: str) -> None:
    api, _tool_id, agent_id = weather
    url, token = served.endpoint("acme", agent_id), token_for_user(user=api.user)
    direct = asyncio.run(_asked_direct())
    via = asyncio.run(_asked_through(url, token, transport, answering=True))
    for name in ("ask", "think"):
        assert not direct[name].is_error, direct[name]
        assert _wire(via[name]) == _wire(direct[name]), name  # the client's own answer, back to the server
    assert "Lyon (Which city?)" in via["ask"].content[0].text
    assert "Bonjour! (Say hello in French.)" in via["think"].content[0].text


def test_a_gateway_client_that_declared_neither_is_declined_with_the_reason(served: Any, weather: Any) -> None:
    api, _tool_id, agent_id = weather
    via = asyncio.run(_asked_through(served.endpoint("acme", agent_id), token_for_user(user=api.user),
                                     "streamable_http", answering=False))
    assert via["ask"].is_error and "did not declare elicitation" in via["ask"].content[0].text
    assert via["think"].is_error and "did not declare sampling" in via["think"].content[0].text


def test_progress_reaches_a_2026_client(served: Any, weather: Any) -> None:
    from tests.agents_app.gateway.modern import client

    api, _tool_id, agent_id = weather
    token = token_for_user(user=api.user)
    seen: list[tuple[float, float | None, str | None]] = []

    async def note(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async def scenario() -> tuple[str, Any]:
        async with client(served.endpoint("acme", agent_id), token) as connected:
            return connected.protocol_version, await connected.call_tool("weather__countdown", {},
                                                                         progress_callback=note)

    version, result = asyncio.run(scenario())
    assert version == "2026-07-28" and not result.is_error and result.content[0].text == "lift-off"
    assert seen == [(1.0, 3.0, "three"), (2.0, 3.0, "two"), (3.0, 3.0, "one")]


def test_a_servers_question_reaches_a_2026_client_as_an_input_request(served: Any, weather: Any) -> None:
    from tests.agents_app.gateway.modern import client

    api, _tool_id, agent_id = weather
    token = token_for_user(user=api.user)
    direct = asyncio.run(_asked_direct())["ask"]
    asked: list[Any] = []

    async def scenario() -> Any:
        async def on_elicit(context: Any, params: Any) -> Any:
            asked.append(params)
            return await _answer_elicit(context, params)

        async with client(served.endpoint("acme", agent_id), token,
                          elicitation_callback=on_elicit) as connected:
            return await connected.call_tool("weather__ask", {})

    via = asyncio.run(scenario())
    assert len(asked) == 1 and asked[0].message == "Which city?"
    wire = _wire(via)
    assert wire["_meta"].pop("io.modelcontextprotocol/serverInfo")["name"] == "toolhub/forecaster"  # 2026's stamp
    if not wire["_meta"]:
        del wire["_meta"]
    assert wire == _wire(direct)  # the client's own answer went back to the server
    assert "Lyon (Which city?)" in via.content[0].text


def test_a_2026_client_without_elicitation_has_the_servers_question_declined(served: Any, weather: Any) -> None:
    from tests.agents_app.gateway.modern import client

    api, _tool_id, agent_id = weather
    token = token_for_user(user=api.user)

    async def scenario() -> Any:
        async with client(served.endpoint("acme", agent_id), token) as connected:
            return await connected.call_tool("weather__ask", {})

    result = asyncio.run(scenario())
    assert "did not declare elicitation" in json.dumps(result.model_dump(mode="json"))


def test_a_relayed_question_answered_at_another_process_is_refused_typed(served_pair: Any, weather: Any,
                                                                         settings: Any) -> None:
    from mcp import types
    from mcp.shared.exceptions import MCPError

    from tests.agents_app.gateway.modern import client

    settings.TOOLHUB_MCP_ELICIT_TIMEOUT_S = 3  # the call left waiting in the first process is declined soon
    api, _tool_id, agent_id = weather
    token = token_for_user(user=api.user)
    first, second = served_pair

    async def on_elicit(context: Any, params: Any) -> Any:
        raise AssertionError("driven by hand")

    async def scenario() -> Any:
        async with client(first.endpoint("acme", agent_id), token, elicitation_callback=on_elicit) as connected:
            asked = await connected.session.call_tool("weather__ask", {}, allow_input_required=True)
        assert isinstance(asked, types.InputRequiredResult)
        answer: types.InputResponses = {"upstream-elicitation": types.ElicitResult(action="accept", content={"city": "Lyon"})}
        async with client(second.endpoint("acme", agent_id), token, elicitation_callback=on_elicit) as connected:
            try:
                await connected.session.call_tool("weather__ask", {}, input_responses=answer,
                                                  request_state=asked.request_state, allow_input_required=True)
            except MCPError as refused:
                return refused
        return None

    refused = asyncio.run(scenario())
    assert isinstance(refused, MCPError)
    assert refused.error.data["code"] == "invalid_request_state"
    assert "another Toolhub process" in refused.error.message
