"""The gateway's trust boundary: prompts and resources under the tools' rules, throttle, session caps, Host and
Origin, and where gateway approvals may be decided. A real uvicorn server, the real SDK client, the real
inventory server (its `inventory://runs/` template says whether a refused request reached its handlers)."""

from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.parse import quote

import httpx2
import mcp_types as types
import pytest
from django.core.cache import cache

from core.throttle import ScopedWindowThrottle
from tenants_app.models import Role
from tenants_app.services import token_for_user
from tests import loopback
from tests.agents_app.gateway.clients import connect, refusal
from tests.agents_app.support import make_agent
from tools_app.models import Approval, Tool, ToolCall, ToolFunction
from tools_app.wiring.pool import pool
from tools_app.wiring.specs import server_spec

# The tests that relay the SDK-built inventory's prompts and resources (conftest's `inventory_server`); the others'
# inventory is MINI (the same tools without the SDK's start).
SDK_INVENTORY = {
    "test_a_viewer_can_neither_read_resources_nor_get_prompts",
    "test_a_tool_with_no_callable_function_on_the_link_offers_no_resources_or_prompts",
    "test_reads_and_prompt_gets_are_audited_like_calls",
    "test_an_upstream_failure_of_a_read_is_audited_and_typed",
    "test_reading_resources_of_a_tool_that_requires_approval_is_refused_typed",
    "test_gateway_calls_count_against_the_invoke_throttle",
}

pytestmark = pytest.mark.django_db(transaction=True)

SKUS = "toolhub://inventory/" + quote("inventory://skus", safe="")
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def handler_runs(setup: Any) -> dict[str, int]:
    """How often the inventory server's prompt and resource handlers ran, asked of the pooled server directly."""
    tool = Tool.objects.get(pk=setup.tool_id)

    async def op(session: Any) -> Any:
        return await session.read_resource("inventory://runs/all")

    read = pool().session_request(server_spec(tool), op)
    counts: dict[str, int] = json.loads(read.contents[0].text)
    return counts


async def _error_of(awaitable: Any) -> Any:
    try:
        await awaitable
    except Exception as exc:  # noqa: BLE001 - the SDK raises the JSON-RPC error
        return getattr(exc, "error", exc)
    raise AssertionError("the request was answered, not refused")


# --- prompts and resources follow the tools' rules ---------------------------------------------------------


def test_a_viewer_can_neither_read_resources_nor_get_prompts(served: Any, setup: Any, member_client: Any) -> None:
    viewer = member_client(setup.tenant, Role.VIEWER)
    token = token_for_user(user=viewer.user)

    async def scenario() -> tuple[Any, Any, Any, Any]:
        async with connect(served.endpoint("acme", setup.agent_id), token) as (session, _):
            listed = await session.list_resources(), await session.list_prompts()
            prompt = await _error_of(session.get_prompt("inventory__stock_question", {"sku": "DEMO-001"}))
            read = await _error_of(session.read_resource(SKUS))
            return (*listed, prompt, read)

    resources, prompts, prompt, read = asyncio.run(scenario())
    assert [r.name for r in resources.resources] == ["inventory__skus"]  # listing, like tools/list, is fine
    assert [p.name for p in prompts.prompts] == ["inventory__stock_question"]
    for error in (prompt, read):
        assert error.data == {"code": "permission_denied", "reason": "viewer_may_not_call"}
    assert handler_runs(setup) == {"prompt": 0, "resource": 0}  # the viewer's input never reached the server
    refused = ToolCall.objects.filter(actor=viewer.user).order_by("id")
    assert [(c.function, c.status) for c in refused] == [("prompts/get", "denied"), ("resources/read", "denied")]


@pytest.mark.parametrize("allowed", [[], ["echo_env"]])
def test_a_tool_with_no_callable_function_on_the_link_offers_no_resources_or_prompts(
    served: Any, setup: Any, allowed: list[str]
) -> None:
    agent_id = make_agent(setup.api, model=None, tools=[{"tool": setup.tool_id, "allowed_functions": allowed}],
                          name="narrow")
    ToolFunction.objects.filter(tool_id=setup.tool_id, name="echo_env").update(enabled=False)  # the one it allows

    async def scenario() -> tuple[Any, Any, Any, Any]:
        async with connect(served.endpoint("acme", agent_id), setup.token) as (session, _):
            return (await session.list_resources(), await session.list_prompts(),
                    await _error_of(session.read_resource(SKUS)),
                    await _error_of(session.get_prompt("inventory__stock_question", {"sku": "X"})))

    resources, prompts, read, prompt = asyncio.run(scenario())
    assert resources.resources == [] and prompts.prompts == []
    assert read.code == types.INVALID_PARAMS and prompt.code == types.INVALID_PARAMS
    assert handler_runs(setup) == {"prompt": 0, "resource": 0}


def test_reads_and_prompt_gets_are_audited_like_calls(served: Any, setup: Any) -> None:
    async def scenario() -> tuple[Any, Any]:
        async with connect(served.endpoint("acme", setup.agent_id), setup.token) as (session, _):
            return (await session.get_prompt("inventory__stock_question", {"sku": "DEMO-001"}),
                    await session.read_resource(SKUS))

    prompt, read = asyncio.run(scenario())
    assert "DEMO-001" in prompt.messages[0].content.text and "DEMO-001" in read.contents[0].text
    rows = list(ToolCall.objects.order_by("id"))
    assert [(r.function, r.status, r.via, r.agent_id, r.actor_id, r.tool_id) for r in rows] == [
        ("prompts/get", "ok", "gateway", setup.agent_id, setup.api.user.pk, setup.tool_id),
        ("resources/read", "ok", "gateway", setup.agent_id, setup.api.user.pk, setup.tool_id),
    ]
    assert rows[0].arguments == {"name": "stock_question", "arguments": {"sku": "DEMO-001"}}
    assert rows[1].arguments == {"uri": "inventory://skus"}
    assert "DEMO-001" in rows[0].result_excerpt and "DEMO-001" in rows[1].result_excerpt


def test_an_upstream_failure_of_a_read_is_audited_and_typed(served: Any, setup: Any) -> None:
    missing = "toolhub://inventory/" + quote("inventory://nope", safe="")

    async def scenario() -> Any:
        async with connect(served.endpoint("acme", setup.agent_id), setup.token) as (session, _):
            return await _error_of(session.read_resource(missing))

    error = asyncio.run(scenario())
    assert error.data["code"] == "upstream_error"
    row = ToolCall.objects.get()
    assert (row.function, row.status, row.arguments) == ("resources/read", "error", {"uri": "inventory://nope"})


@pytest.mark.parametrize("flag", ["tool", "link"])
def test_reading_resources_of_a_tool_that_requires_approval_is_refused_typed(
    served: Any, setup: Any, flag: str
) -> None:
    if flag == "tool":
        Tool.objects.filter(pk=setup.tool_id).update(requires_approval=True)
        agent_id = setup.agent_id
    else:
        agent_id = make_agent(setup.api, model=None, tools=[{"tool": setup.tool_id, "requires_approval": True}],
                              name="careful")

    async def scenario() -> tuple[Any, Any]:
        async with connect(served.endpoint("acme", agent_id), setup.token) as (session, _):
            return (await _error_of(session.read_resource(SKUS)),
                    await _error_of(session.get_prompt("inventory__stock_question", {"sku": "DEMO-001"})))

    read, prompt = asyncio.run(scenario())
    for error in (read, prompt):
        assert error.data == {"code": "approval_required", "tool": "inventory"}
    Tool.objects.filter(pk=setup.tool_id).update(requires_approval=False)
    assert handler_runs(setup) == {"prompt": 0, "resource": 0}
    rows = ToolCall.objects.order_by("id")
    assert [(r.function, r.status, r.error_code) for r in rows] == [
        ("resources/read", "denied", "APPROVAL_REQUIRED"), ("prompts/get", "denied", "APPROVAL_REQUIRED")]
    assert not Approval.objects.exists()


# --- the invoke throttle counts gateway calls -------------------------------------------------------------


@pytest.fixture
def three_per_minute(monkeypatch: Any) -> Any:
    cache.clear()
    monkeypatch.setattr(ScopedWindowThrottle, "THROTTLE_RATES", {"invoke": "3/min", "chat": "3/min", "test": "3/min"})
    yield
    cache.clear()


def test_gateway_calls_count_against_the_invoke_throttle(served: Any, setup: Any, three_per_minute: Any) -> None:
    resp = setup.api.post(f"/api/v1/tools/{setup.tool_id}/invoke/",
                          {"function": "get_inventory", "arguments": {"sku": "DEMO-001"}}, format="json")
    assert resp.status_code == 200, resp.content  # one of the three through the API

    async def scenario() -> tuple[list[Any], Any, Any]:
        async with connect(served.endpoint("acme", setup.agent_id), setup.token) as (session, _):
            ok = [await session.call_tool("inventory__get_inventory", {"sku": "DEMO-001"}) for _ in range(2)]
            refused = await _error_of(session.call_tool("inventory__get_inventory", {"sku": "DEMO-001"}))
            read = await _error_of(session.read_resource(SKUS))
            return ok, refused, read

    ok, refused, read = asyncio.run(scenario())
    assert [r.is_error for r in ok] == [False, False]
    for error in (refused, read):
        assert error.data["code"] == "throttled"
        assert 0 < error.data["retry_after_s"] <= 60
        assert f"retry in {error.data['retry_after_s']} s" in error.message
    assert ToolCall.objects.filter(function="get_inventory").count() == 3  # the refused one did not run
    api_again = setup.api.post(f"/api/v1/tools/{setup.tool_id}/invoke/",
                               {"function": "get_inventory", "arguments": {"sku": "DEMO-001"}}, format="json")
    assert api_again.status_code == 429  # and the API sees the gateway's calls


# --- sessions per token and per member -------------------------------------------------------------------
# These and the Host and Origin tests are decided before any tool runs: their inventory tool is not discovered
# (`setup_undiscovered`, a start of the SDK-built server each saved); tools/list answers from what is known.


def _initialize(url: str, token: str, **headers: str) -> httpx2.Response:
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "probe", "version": "1"}}}
    return loopback.post(url, json=body, headers={**MCP_HEADERS, "Authorization": f"Bearer {token}", **headers})


def _lists(url: str, token: str, session_id: str) -> int:
    body = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
    return loopback.post(url, json=body, headers={**MCP_HEADERS, "Authorization": f"Bearer {token}",
                                                  "Mcp-Session-Id": session_id,
                                                  "Mcp-Protocol-Version": "2025-06-18"}).status_code


def test_sessions_per_member_are_capped(served: Any, setup_undiscovered: Any, settings: Any) -> None:
    setup = setup_undiscovered
    settings.TOOLHUB_MCP_MAX_SESSIONS_PER_MEMBER = 2
    settings.TOOLHUB_MCP_MAX_SESSIONS_PER_TOKEN = 10
    other_agent = make_agent(setup.api, model=None, tools=[{"tool": setup.tool_id}], name="second")
    first = _initialize(served.endpoint("acme", setup.agent_id), setup.token)
    second = _initialize(served.endpoint("acme", other_agent), setup.token)
    assert first.status_code == second.status_code == 200
    third = _initialize(served.endpoint("acme", other_agent), setup.token)
    assert third.status_code == 200  # at the cap the member's least recently used session was closed
    assert _lists(served.endpoint("acme", setup.agent_id), setup.token, first.headers["mcp-session-id"]) == 404
    assert _lists(served.endpoint("acme", other_agent), setup.token, second.headers["mcp-session-id"]) == 200
    # Ending one (DELETE) frees its place: the next one closes nothing.
    closed = loopback.delete(served.endpoint("acme", other_agent), headers={
        "Authorization": f"Bearer {setup.token}", "Mcp-Session-Id": third.headers["mcp-session-id"],
        "Mcp-Protocol-Version": "2025-06-18"})
    assert closed.status_code == 200
    assert _initialize(served.endpoint("acme", other_agent), setup.token).status_code == 200
    assert _lists(served.endpoint("acme", other_agent), setup.token, second.headers["mcp-session-id"]) == 200


def test_sessions_per_token_are_capped_across_tenants(
    served: Any, setup_undiscovered: Any, settings: Any, other_tenant: Any, member_client: Any
) -> None:
    setup = setup_undiscovered
    settings.TOOLHUB_MCP_MAX_SESSIONS_PER_MEMBER = 10
    settings.TOOLHUB_MCP_MAX_SESSIONS_PER_TOKEN = 2
    theirs = member_client(other_tenant, Role.ADMIN, user=setup.api.user)  # the same person, a second tenant
    other_agent = make_agent(theirs, model=None, name="theirs")
    oldest = _initialize(served.endpoint("acme", setup.agent_id), setup.token)
    assert oldest.status_code == 200
    assert _initialize(served.endpoint("acme", setup.agent_id), setup.token).status_code == 200
    third = _initialize(served.endpoint("globex", other_agent), setup.token)
    assert third.status_code == 200  # the token's least recently used session, in the other tenant, was closed
    assert _lists(served.endpoint("acme", setup.agent_id), setup.token, oldest.headers["mcp-session-id"]) == 404
    # Another member's token is not affected.
    someone = member_client(setup.tenant, Role.MEMBER)
    assert _initialize(served.endpoint("acme", setup.agent_id), token_for_user(user=someone.user)).status_code == 200


def test_the_cap_holds_across_web_processes(served_pair: Any, setup_undiscovered: Any, settings: Any) -> None:
    setup = setup_undiscovered
    settings.TOOLHUB_MCP_MAX_SESSIONS_PER_MEMBER = 2
    settings.TOOLHUB_MCP_SESSION_TOUCH_S = 0
    first, second = served_pair
    opened = [_initialize(first.endpoint("acme", setup.agent_id), setup.token).headers["mcp-session-id"]
              for _ in range(2)]
    assert _initialize(second.endpoint("acme", setup.agent_id), setup.token).status_code == 200  # the other knows
    assert _lists(first.endpoint("acme", setup.agent_id), setup.token, opened[0]) == 404  # it closed the oldest
    assert _lists(first.endpoint("acme", setup.agent_id), setup.token, opened[1]) == 200


def test_an_open_sse_stream_counts_as_a_session(served: Any, setup_undiscovered: Any, settings: Any) -> None:
    setup = setup_undiscovered
    settings.TOOLHUB_MCP_MAX_SESSIONS_PER_MEMBER = 1
    url = served.endpoint("acme", setup.agent_id)

    async def scenario() -> tuple[int, int]:
        async with connect(url, setup.token, transport="sse"):
            during = await asyncio.to_thread(lambda: _initialize(url, setup.token).status_code)
        after = await asyncio.to_thread(lambda: _initialize(url, setup.token).status_code)
        return during, after

    assert asyncio.run(scenario()) == (429, 200)


def test_a_continued_session_is_not_counted_again(served: Any, setup: Any, settings: Any) -> None:
    settings.TOOLHUB_MCP_MAX_SESSIONS_PER_MEMBER = 1

    async def scenario() -> Any:
        async with connect(served.endpoint("acme", setup.agent_id), setup.token) as (session, _):
            for _ in range(3):
                await session.list_tools()
            return await session.call_tool("inventory__get_inventory", {"sku": "DEMO-001"})

    assert not asyncio.run(scenario()).is_error
    assert not asyncio.run(scenario()).is_error  # the first session was closed (DELETE) on the way out


# --- Host and Origin --------------------------------------------------------------------------------------


def test_a_host_outside_allowed_hosts_is_refused(served: Any, setup_undiscovered: Any) -> None:
    setup = setup_undiscovered
    url = served.endpoint("acme", setup.agent_id)
    for token in (setup.token, "nope"):
        resp = _initialize(url, token, Host="attacker.example")
        assert resp.status_code == 400
        assert resp.json()["error"]["code"] == "disallowed_host"
        assert setup.token not in resp.text
    sse = loopback.get(url + "sse", headers={"Authorization": f"Bearer {setup.token}", "Host": "attacker.example"})
    assert sse.status_code == 400
    assert _initialize(url, setup.token, Host="localhost").status_code == 200


def test_an_origin_other_than_the_sites_own_is_refused(served: Any, setup_undiscovered: Any, settings: Any) -> None:
    setup = setup_undiscovered
    url = served.endpoint("acme", setup.agent_id)
    for origin in ("http://attacker.example", "null", "http://127.0.0.1.attacker.example:8000"):
        resp = _initialize(url, setup.token, Origin=origin)
        assert resp.status_code == 403, origin
        assert resp.json()["error"]["code"] == "forbidden_origin"
    assert _initialize(url, setup.token, Origin=served.base_url).status_code == 200
    assert _initialize(url, setup.token, Origin="http://localhost:3000").status_code == 200
    settings.CSRF_TRUSTED_ORIGINS = ["https://console.example.com"]
    assert _initialize(url, setup.token, Origin="https://console.example.com").status_code == 200
    settings.TOOLHUB_PUBLIC_URL = "https://hub.example.com/base/"
    assert _initialize(url, setup.token, Origin="https://hub.example.com").status_code == 200
    assert _initialize(url, setup.token, Origin="https://hub.example.com.attacker.example").status_code == 403
    assert _initialize(url, setup.token).status_code == 200  # no Origin (not a browser): fine


# --- approvals asked through the gateway decided only in Toolhub ------------------------------------------


def test_a_tenant_can_keep_gateway_approvals_out_of_the_clients_hands(served: Any, setup: Any) -> None:
    resp = setup.api.patch(f"/api/v1/tools/{setup.tool_id}/functions/get_inventory/", {"requires_approval": True},
                           format="json")
    assert resp.status_code == 200, resp.content
    setup.tenant.gateway_approvals_in_toolhub_only = True
    setup.tenant.save(update_fields=["gateway_approvals_in_toolhub_only"])
    asked: list[Any] = []

    async def on_elicit(context: Any, params: Any) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"approve": True})

    async def scenario() -> Any:
        async with connect(served.endpoint("acme", setup.agent_id), setup.token,
                           elicitation_callback=on_elicit) as (session, _):
            return await session.call_tool("inventory__get_inventory", {"sku": "DEMO-001"})

    result = asyncio.run(scenario())
    assert not asked  # the client was never offered the decision
    approval = Approval.objects.get()
    assert result.is_error and refusal(result)["approval_id"] == approval.pk
    assert approval.status == "pending" and not ToolCall.objects.filter(status="ok").exists()
    decided = setup.api.post(f"/api/v1/approvals/{approval.pk}/approve/")  # in Toolhub it is decided as ever
    assert decided.status_code == 200, decided.content


def test_an_answer_arriving_after_the_tenant_ruled_so_decides_nothing(served: Any, setup: Any) -> None:
    resp = setup.api.patch(f"/api/v1/tools/{setup.tool_id}/functions/get_inventory/", {"requires_approval": True},
                           format="json")
    assert resp.status_code == 200, resp.content

    def rule() -> None:
        setup.tenant.gateway_approvals_in_toolhub_only = True
        setup.tenant.save(update_fields=["gateway_approvals_in_toolhub_only"])

    async def on_elicit(context: Any, params: Any) -> types.ElicitResult:
        await asyncio.to_thread(rule)  # while the client is being asked, an owner changes the policy
        return types.ElicitResult(action="accept", content={"approve": True})

    async def scenario() -> Any:
        async with connect(served.endpoint("acme", setup.agent_id), setup.token,
                           elicitation_callback=on_elicit) as (session, _):
            return await session.call_tool("inventory__get_inventory", {"sku": "DEMO-001"})

    result = asyncio.run(scenario())
    approval = Approval.objects.get()
    assert result.is_error and refusal(result)["approval_id"] == approval.pk
    assert approval.status == "pending" and not ToolCall.objects.filter(status="ok").exists()
