"""Tool search through the gateway with the real Python SDK client: an agent of 300 functions lists
`search_functions` and `call`; a function found by search is called by name or through `call`, under the same
roles, links and approvals as a listed one.

Only `REAL_EMBEDDER`'s test searches with the real embedders (it measures search quality: a paraphrase and a
Chinese question find their function among 300); the others are about what is built around search (list_changed,
the index cache, pinned functions, links, approvals, roles, arguments, the playground) and search on the
deterministic one (tests/fixtures/hashed_embedder.py), with questions that share words with what they should find.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from django.test import Client

from agents_app.gateway import search as gateway_search
from tenants_app.models import Role
from tenants_app.services import token_for_user
from tests.agents_app.gateway.clients import connect, refusal
from tests.agents_app.gateway.warm import discovery_kept_for_calls
from tests.agents_app.support import make_agent
from tests.fixtures.hashed_embedder import hashed_embedder
from tests.tools_app.discovered import Discovered
from tools_app.models import CallStatus, ToolCall, ToolFunction

pytestmark = pytest.mark.django_db(transaction=True)


SERVER = Path(__file__).resolve().parents[2] / "fixtures" / "mcp_servers" / "many_functions.py"
REAL_EMBEDDER = {"test_a_client_searches_300_functions_and_calls_what_it_found"}


def _forget_vectors() -> None:
    """The gateway's process-wide vectors and indexes are keyed by text, not by embedder: none built on one
    embedder may answer a search on the other (in this module or the next one the worker runs)."""
    gateway_search._vectors.clear()
    gateway_search._indexes.clear()


@pytest.fixture(autouse=True)
def _embedder(request: Any) -> Iterator[None]:
    """The deterministic embedder for every test but `REAL_EMBEDDER`'s (see the module's docstring): no model
    loaded and no 300 functions embedded where ranking quality is not what the test proves."""
    if request.node.originalname in REAL_EMBEDDER:
        yield
        return
    with hashed_embedder():
        _forget_vectors()
        try:
            yield
        finally:
            _forget_vectors()


@pytest.fixture(scope="module")
def office_listing() -> Discovered:
    """The office server's listing, probed for real by the module's first test and kept for the others (the
    same 300 functions every time): each test still creates the tool and refreshes it through the API (the functions
    stored, screened and approved as ever), but only a test whose calls reach the server starts it, on its first
    call. Discovery itself is tested in tests/tools_app (test_mcp_api.py, test_function_drift.py)."""
    return Discovered()


@pytest.fixture
def big(transactional_db: Any, tenant: Any, member_client: Any, office_listing: Discovered) -> dict[str, Any]:
    """Agent `big` linked to one stdio server of 300 functions (all but `clean_heater`, left out of the link)."""
    api = member_client(tenant, Role.ADMIN)
    resp = api.post("/api/v1/tools/", {"name": "office", "type": "LOCAL", "config": {
        "command": sys.executable, "args": [str(SERVER), "--count", "300"], "startup_timeout_s": 20}}, format="json")
    assert resp.status_code == 201, resp.content
    tool_id = int(resp.json()["id"])
    with discovery_kept_for_calls(), office_listing.probes():  # a real probe's server is kept for the calls
        assert api.post(f"/api/v1/tools/{tool_id}/refresh/").json()["ok"]
    names = list(ToolFunction.objects.filter(tool_id=tool_id).values_list("name", flat=True))
    assert len(names) == 300
    assert "clean_heater" in names
    allowed = [n for n in names if n != "clean_heater"]
    agent_id = make_agent(api, model=None, tools=[{"tool": tool_id, "allowed_functions": allowed}], name="big")
    return {"api": api, "tool_id": tool_id, "agent_id": agent_id, "token": token_for_user(user=api.user)}


def found(result: Any) -> list[dict[str, Any]]:
    assert not result.is_error, result.content
    listed: list[dict[str, Any]] = result.structured_content["functions"]
    assert listed == json.loads(result.content[0].text)["functions"]
    return listed


def test_a_client_searches_300_functions_and_calls_what_it_found(served: Any, big: dict[str, Any]) -> None:
    url = served.endpoint("acme", big["agent_id"])

    async def scenario() -> tuple[Any, ...]:
        async with connect(url, big["token"]) as (session, _):
            tools = await session.list_tools()
            hits = await session.call_tool("search_functions", {"query": "open a support ticket for a problem"})
            zh = await session.call_tool("search_functions", {"query": "帮我预订一个会议室", "limit": 5})
            direct = await session.call_tool("office__create_ticket", {"query": "printer on fire"})
            via_call = await session.call_tool("call", {"name": "office__book_meeting_room",
                                                        "arguments": {"where": "floor 3"}})
            return tools, hits, zh, direct, via_call

    tools, hits, zh, direct, via_call = asyncio.run(scenario())
    assert [t.name for t in tools.tools] == ["search_functions", "call"]  # auto: 299 functions >= 40
    assert tools.tools[0].input_schema["required"] == ["query"]
    first = found(hits)
    assert len(first) == 8 and "office__create_ticket" in [f["name"] for f in first[:5]]
    ticket = next(f for f in first if f["name"] == "office__create_ticket")
    assert ticket["title"] == "Open a ticket" and ticket["description"].startswith("Create a new support ticket")
    assert ticket["inputSchema"]["properties"] == {"query": {"type": "string"}}
    assert "office__book_meeting_room" in [f["name"] for f in found(zh)]
    assert not direct.is_error and direct.structured_content["function"] == "create_ticket"
    assert not via_call.is_error
    assert via_call.structured_content == {"function": "book_meeting_room", "arguments": {"where": "floor 3"}}
    calls = ToolCall.objects.filter(agent_id=big["agent_id"]).order_by("id")
    assert [(c.function, c.status, c.via) for c in calls] == [("create_ticket", CallStatus.OK, "gateway"),
                                                              ("book_meeting_room", CallStatus.OK, "gateway")]


def test_a_2025_client_hears_list_changed_and_lists_what_search_found(served: Any, big: dict[str, Any]) -> None:
    heard: list[str] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            heard.append("tools/list_changed")

    async def scenario() -> tuple[Any, ...]:
        async with connect(served.endpoint("acme", big["agent_id"]), big["token"], message_handler=on_message) as (
                session, _):
            before = await session.list_tools()
            hits = await session.call_tool("search_functions", {"query": "book a meeting room", "limit": 3})
            after_first = list(heard)
            listed = await session.list_tools()
            again = await session.call_tool("search_functions", {"query": "book a meeting room", "limit": 3})
            after_again = list(heard)
            more = await session.call_tool("search_functions", {"query": "clean the fridge", "limit": 2})
            last = await session.list_tools()
            by_name = await session.call_tool("office__book_meeting_room", {"where": "floor 3"})
            via_call = await session.call_tool("call", {"name": "office__book_meeting_room",
                                                        "arguments": {"where": "floor 4"}})
            return before, hits, after_first, listed, again, after_again, more, last, by_name, via_call

    before, hits, after_first, listed, again, after_again, more, last, by_name, via_call = asyncio.run(scenario())
    first = [f["name"] for f in found(hits)]
    assert "office__book_meeting_room" in first
    assert [t.name for t in before.tools] == ["search_functions", "call"]
    assert after_first == ["tools/list_changed"]  # on the search's own response stream
    assert [t.name for t in listed.tools] == ["search_functions", "call", *first]
    shown = next(t for t in listed.tools if t.name == "office__book_meeting_room")
    assert shown.input_schema["properties"] == {"where": {"type": "string"}}
    assert [f["name"] for f in found(again)] == first and after_again == after_first  # nothing new: no notice
    extra = [f["name"] for f in found(more) if f["name"] not in first]
    assert "office__clean_fridge" in [f["name"] for f in found(more)] and extra
    assert len(heard) == 2 and [t.name for t in last.tools] == ["search_functions", "call", *first, *extra]
    assert not by_name.is_error and not via_call.is_error  # the `call` meta-tool still runs a found function
    assert via_call.structured_content == {"function": "book_meeting_room", "arguments": {"where": "floor 4"}}


def test_the_search_index_is_built_once_per_content_and_a_description_edit_is_found(
        served: Any, big: dict[str, Any]) -> None:
    async def search_for(query: str) -> list[str]:
        async with connect(served.endpoint("acme", big["agent_id"]), big["token"]) as (session, _):
            return [f["name"] for f in found(await session.call_tool("search_functions", {"query": query}))]

    gateway_search._indexes.clear()
    asyncio.run(search_for("open a support ticket"))
    built = list(gateway_search._indexes.values())
    asyncio.run(search_for("book a desk for tomorrow"))
    assert len(built) == 1 and list(gateway_search._indexes.values()) == built  # the second search embeds only itself
    query = "feed the aquarium's goldfish"
    assert "office__order_chair" not in asyncio.run(search_for(query))[:1]
    resp = big["api"].patch(f"/api/v1/tools/{big['tool_id']}/functions/order_chair/",
                            {"description_override": "Feed the goldfish in the office aquarium."}, format="json")
    assert resp.status_code == 200, resp.content
    assert asyncio.run(search_for(query))[0] == "office__order_chair"
    assert len(gateway_search._indexes) == 2 and built[0] in gateway_search._indexes.values()


def test_the_agents_most_used_functions_are_listed_beside_the_meta_tools(served: Any, big: dict[str, Any],
                                                                         settings: Any) -> None:
    settings.TOOLHUB_TOOL_SEARCH_PINNED = 2
    for function, times in (("clean_fridge", 3), ("book_desk", 2), ("order_chair", 1), ("clean_heater", 9)):
        for _ in range(times):  # the audit of earlier calls (clean_heater: no longer in the agent's link)
            ToolCall.objects.create(tenant=big["api"].user.memberships.get().tenant, agent_id=big["agent_id"],
                                    tool_id=big["tool_id"], tool_name="office", function=function,
                                    status=CallStatus.OK)

    async def scenario() -> Any:
        async with connect(served.endpoint("acme", big["agent_id"]), big["token"]) as (session, _):
            return await session.list_tools()

    listed = asyncio.run(scenario())
    assert [t.name for t in listed.tools] == ["search_functions", "call", "office__clean_fridge", "office__book_desk"]


def test_search_never_finds_or_calls_a_function_outside_the_agents_link(served: Any, big: dict[str, Any]) -> None:
    async def scenario() -> tuple[Any, Any, Any]:
        async with connect(served.endpoint("acme", big["agent_id"]), big["token"]) as (session, _):
            hits = await session.call_tool("search_functions", {"query": "clean the heater", "limit": 20})
            direct = await session.call_tool("office__clean_heater", {})
            via_call = await session.call_tool("call", {"name": "office__clean_heater", "arguments": {}})
            return hits, direct, via_call

    hits, direct, via_call = asyncio.run(scenario())
    assert "office__clean_heater" not in [f["name"] for f in found(hits)]
    assert "office__repair_heater" in [f["name"] for f in found(hits)]
    for result in (direct, via_call):
        assert result.is_error and refusal(result)["error_code"] == "NOT_FOUND"


def test_a_found_function_that_needs_approval_is_held_like_a_listed_one(served: Any, big: dict[str, Any]) -> None:
    resp = big["api"].patch(f"/api/v1/tools/{big['tool_id']}/functions/order_laptop/",
                            {"requires_approval": True}, format="json")
    assert resp.status_code == 200, resp.content

    async def scenario() -> Any:
        async with connect(served.endpoint("acme", big["agent_id"]), big["token"]) as (session, _):
            return await session.call_tool("call", {"name": "office__order_laptop", "arguments": {"where": "HQ"}})

    held = asyncio.run(scenario())
    assert held.is_error and refusal(held)["error_code"] == "APPROVAL_REQUIRED"
    assert ToolCall.objects.get(function="order_laptop").status == CallStatus.AWAITING_APPROVAL


def test_a_viewer_may_search_but_not_call(served: Any, big: dict[str, Any], tenant: Any, member_client: Any) -> None:
    token = token_for_user(user=member_client(tenant, Role.VIEWER).user)

    async def scenario() -> tuple[Any, Any]:
        async with connect(served.endpoint("acme", big["agent_id"]), token) as (s, _):
            return (await s.call_tool("search_functions", {"query": "clean the fridge"}),
                    await s.call_tool("call", {"name": "office__clean_fridge", "arguments": {}}))

    hits, refused = asyncio.run(scenario())
    assert "office__clean_fridge" in [f["name"] for f in found(hits)]
    assert refused.is_error and refusal(refused)["error_reason"] == "viewer_may_not_call"


BAD_META_ARGUMENTS: list[tuple[str, dict[str, Any]]] = [
    ("search_functions", {}), ("search_functions", {"query": "  "}), ("search_functions", {"query": "x", "limit": 0}),
    ("search_functions", {"query": "x", "colour": "red"}), ("call", {}), ("call", {"name": "office__clean_fridge",
                                                                                    "arguments": "no"}),
    ("call", {"name": "search_functions", "arguments": {}}),
]


def test_bad_meta_tool_arguments_are_invalid_params(served: Any, big: dict[str, Any]) -> None:
    """Every case in one session of one agent (it was one test per case): building `big` (300 functions stored
    and screened) costs most of a test here, and a refused call changes nothing the next case could see. Each
    case is still asserted on its own, named in the failure message."""
    async def scenario() -> list[Any]:
        async with connect(served.endpoint("acme", big["agent_id"]), big["token"]) as (session, _):
            return [await session.call_tool(name, arguments) for name, arguments in BAD_META_ARGUMENTS]

    for (name, arguments), result in zip(BAD_META_ARGUMENTS, asyncio.run(scenario()), strict=True):
        assert result.is_error and refusal(result)["error_code"] == "INVALID_PARAMS", (name, arguments, result)


def test_tool_search_off_lists_every_function_and_has_no_meta_tools(served: Any, big: dict[str, Any]) -> None:
    resp = big["api"].patch(f"/api/v1/agents/{big['agent_id']}/", {"tool_search": "off"}, format="json")
    assert resp.status_code == 200 and resp.json()["tool_search"] == "off"

    async def scenario() -> tuple[Any, Any]:
        async with connect(served.endpoint("acme", big["agent_id"]), big["token"]) as (session, _):
            return await session.list_tools(), await session.call_tool("search_functions", {"query": "printer"})

    tools, search = asyncio.run(scenario())
    names = [t.name for t in tools.tools]
    assert len(names) == 299 and "search_functions" not in names
    assert search.is_error and refusal(search)["error_code"] == "NOT_FOUND"


def test_the_playground_shows_what_search_finds_for_the_member(big: dict[str, Any]) -> None:
    browser = Client()
    browser.force_login(big["api"].user)
    page = browser.get("/playground/", {"tenant": "acme", "agent": big["agent_id"], "find": "clean the heater"})
    html = page.content.decode()
    assert page.status_code == 200 and 'id="tool-search"' in html
    assert "big: 299 functions for you; gateway clients list search_functions" in html
    found = html.split('<ol class="found">', 1)[1].split("</ol>", 1)[0]
    assert "<code>office__repair_heater</code>" in found
    assert "office__clean_heater" not in found  # outside the agent's link: never found, as on the gateway
    assert 'value="clean the heater"' in html
    empty = browser.get("/playground/", {"tenant": "acme", "agent": big["agent_id"]}).content.decode()
    assert 'id="tool-search"' in empty and '<ol class="found">' not in empty  # a box, nothing searched yet
    big["api"].patch(f"/api/v1/agents/{big['agent_id']}/", {"tool_search": "off"}, format="json")
    off = browser.get("/playground/", {"tenant": "acme", "agent": big["agent_id"], "find": "clean the heater"})
    assert "tool search is off for this agent" in off.content.decode()
