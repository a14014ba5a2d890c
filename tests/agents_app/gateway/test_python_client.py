"""The `mcp` Python SDK client (streamable HTTP and SSE) against the gateway on a real uvicorn server."""

from __future__ import annotations

import asyncio
import threading
from datetime import timedelta
from typing import Any

import mcp_types as types
import pytest
from django.utils import timezone

from agents_app.toolsets import build_toolset
from tenants_app.models import Role
from tenants_app.services import token_for_user
from tests import loopback
from tests.agents_app.gateway.clients import connect, refusal
from tests.agents_app.support import make_agent
from tests.waiting import scaled, wait_until_async
from tools_app.models import Approval, FunctionState, Tool, ToolCall, ToolFunction

# The tests that relay the SDK-built inventory's prompts and resources (conftest's `inventory_server`); the others'
# inventory is MINI (the same tools without the SDK's start).
SDK_INVENTORY = {"test_prompts_and_resources_are_offered_namespaced_and_read_only"}

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def setup(listed_once: Any) -> Any:
    """The inventory's listing probed once for the module (conftest's `listed_once`): a test whose calls never reach
    the server starts none."""
    return listed_once


@pytest.mark.parametrize("transport", ["streamable_http", "sse"])
def test_lists_and_calls_the_agents_functions(served: Any, setup: Any, transport: str) -> None:
    url = served.endpoint("acme", setup.agent_id)

    async def scenario() -> tuple[Any, Any, Any]:
        async with connect(url, setup.token, transport=transport) as (session, init):
            tools = await session.list_tools()
            result = await session.call_tool("inventory__get_inventory", {"sku": "DEMO-001"})
            return init, tools, result

    init, tools, result = asyncio.run(scenario())
    assert init.server_info.name == "toolhub/helper"
    assert init.instructions == "Answers stock questions for the warehouse team."
    toolset = build_toolset(tenant=setup.tenant, actor=setup.api.user, agent=setup.agent)
    assert [t.name for t in tools.tools] == toolset.names()
    listed = {t.name: t for t in tools.tools}
    fn = toolset.get("inventory__get_inventory")
    assert fn is not None
    assert listed[fn.qualified_name].input_schema == fn.parameters
    assert listed[fn.qualified_name].description == fn.description
    for name, tool in listed.items():  # annotations follow each function's safety
        safety = toolset.get(name).safety  # type: ignore[union-attr]
        assert tool.annotations.read_only_hint is (safety == "READ_ONLY")
        assert tool.annotations.destructive_hint is (safety == "DESTRUCTIVE")
        assert tool.annotations.title
    assert not result.is_error
    assert "DEMO-001" in result.content[0].text
    call = ToolCall.objects.get(function="get_inventory")
    assert call.agent_id == setup.agent_id and call.via == "gateway" and call.actor_id == setup.api.user.pk


def test_annotations_follow_the_functions_safety(served: Any, setup: Any) -> None:
    for name, safety in (("get_inventory", "READ_ONLY"), ("echo_env", "DESTRUCTIVE")):
        resp = setup.api.patch(f"/api/v1/tools/{setup.tool_id}/functions/{name}/", {"safety": safety}, format="json")
        assert resp.status_code == 200, resp.content

    async def scenario() -> Any:
        async with connect(served.endpoint("acme", setup.agent_id), setup.token) as (session, _):
            return await session.list_tools()

    listed = {t.name: t.annotations for t in asyncio.run(scenario()).tools}
    assert listed["inventory__get_inventory"].read_only_hint is True
    assert listed["inventory__get_inventory"].destructive_hint is False
    assert listed["inventory__echo_env"].read_only_hint is False
    assert listed["inventory__echo_env"].destructive_hint is True
    assert listed["inventory__whoami"].read_only_hint is False and listed["inventory__whoami"].destructive_hint is False


def _initialize_body() -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "probe", "version": "1"}}}


MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def test_no_token_or_a_bad_one_is_401_with_www_authenticate(served: Any, setup_undiscovered: Any) -> None:
    url = served.endpoint("acme", setup_undiscovered.agent_id)
    missing = loopback.post(url, json=_initialize_body(), headers=MCP_HEADERS)
    bad = loopback.post(url, json=_initialize_body(), headers={**MCP_HEADERS, "Authorization": "Bearer nope"})
    token_scheme = loopback.post(url, json=_initialize_body(),
                                 headers={**MCP_HEADERS, "Authorization": f"Token {setup_undiscovered.token}"})
    sse = loopback.get(url + "sse")
    for resp in (missing, bad, token_scheme, sse):
        assert resp.status_code == 401
        assert resp.headers["www-authenticate"].startswith('Bearer realm="toolhub"')
    assert 'error="invalid_token"' in bad.headers["www-authenticate"]
    assert setup_undiscovered.token not in bad.text


def test_foreign_tenant_missing_agent_and_foreign_agent_are_one_404(
    served: Any, setup_undiscovered: Any, other_tenant: Any, member_client: Any
) -> None:
    other_api = member_client(other_tenant, Role.ADMIN)
    foreign_agent = make_agent(other_api, model=None, name="theirs")
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {setup_undiscovered.token}"}
    answers = [
        loopback.post(served.endpoint("globex", foreign_agent), json=_initialize_body(), headers=headers),  # not a member
        loopback.post(served.endpoint("acme", 999999), json=_initialize_body(), headers=headers),  # missing
        loopback.post(served.endpoint("acme", foreign_agent), json=_initialize_body(), headers=headers),  # other tenant's
        loopback.post(served.endpoint("nosuch", setup_undiscovered.agent_id), json=_initialize_body(), headers=headers),
        loopback.get(served.endpoint("globex", foreign_agent) + "sse", headers=headers),
    ]
    assert {a.status_code for a in answers} == {404}
    assert len({a.content for a in answers}) == 1
    assert answers[0].json()["error"]["code"] == "not_found"


def test_a_client_of_one_tenant_cannot_reach_another_tenants_agent(
    served: Any, setup_undiscovered: Any, other_tenant: Any, member_client: Any
) -> None:
    other_api = member_client(other_tenant, Role.ADMIN)
    other_token = token_for_user(user=other_api.user)

    async def scenario() -> None:
        async with connect(served.endpoint("acme", setup_undiscovered.agent_id), other_token):
            pass

    with pytest.raises(BaseException) as info:
        asyncio.run(scenario())
    assert "404" in repr(info.value) or "not found" in repr(info.value).lower()
    assert not ToolCall.objects.exists()


def test_a_session_answers_only_the_credential_that_opened_it(served: Any, setup_undiscovered: Any, member_client: Any) -> None:
    url = served.endpoint("acme", setup_undiscovered.agent_id)
    opened = loopback.post(url, json=_initialize_body(), headers={**MCP_HEADERS, "Authorization": f"Bearer {setup_undiscovered.token}"})
    session_id = opened.headers["mcp-session-id"]
    other = member_client(setup_undiscovered.tenant, Role.MEMBER)
    hijack = loopback.post(url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers={
        **MCP_HEADERS, "Authorization": f"Bearer {token_for_user(user=other.user)}", "Mcp-Session-Id": session_id,
        "Mcp-Protocol-Version": "2025-06-18"})
    assert hijack.status_code == 404


def test_viewers_list_but_cannot_call(served: Any, setup: Any, member_client: Any) -> None:
    viewer = member_client(setup.tenant, Role.VIEWER)
    token = token_for_user(user=viewer.user)

    async def scenario() -> tuple[Any, Any]:
        async with connect(served.endpoint("acme", setup.agent_id), token) as (session, _):
            return await session.list_tools(), await session.call_tool("inventory__get_inventory", {"sku": "X"})

    tools, result = asyncio.run(scenario())
    assert "inventory__get_inventory" in [t.name for t in tools.tools]
    assert result.is_error
    assert refusal(result) == {"error_code": "DISABLED", "error_reason": "viewer_may_not_call"}
    assert not ToolCall.objects.filter(status="ok").exists()


def test_changed_and_disabled_functions_never_appear(served: Any, setup: Any) -> None:
    ToolFunction.objects.filter(tool_id=setup.tool_id, name="echo_env").update(state=FunctionState.CHANGED)
    ToolFunction.objects.filter(tool_id=setup.tool_id, name="whoami").update(enabled=False)

    async def scenario() -> tuple[Any, Any]:
        async with connect(served.endpoint("acme", setup.agent_id), setup.token) as (session, _):
            return await session.list_tools(), await session.call_tool("inventory__echo_env", {"name": "HOME"})

    tools, result = asyncio.run(scenario())
    names = [t.name for t in tools.tools]
    assert "inventory__get_inventory" in names
    assert "inventory__echo_env" not in names and "inventory__whoami" not in names
    # Not offered, and the client is told why (invoke's own refusal), not "unknown tool".
    assert result.is_error and refusal(result) == {"error_code": "DISABLED", "error_reason": "function_changed"}


def test_a_paused_tool_is_answered_with_its_pause_not_unknown_tool(served: Any, setup: Any) -> None:
    until = timezone.now() + timedelta(minutes=5)
    Tool.objects.filter(pk=setup.tool_id).update(consecutive_failures=3, disabled_until=until)

    async def scenario() -> tuple[Any, Any, Any]:
        async with connect(served.endpoint("acme", setup.agent_id), setup.token) as (session, _):
            return (await session.list_tools(), await session.call_tool("inventory__get_inventory", {"sku": "X"}),
                    await session.call_tool("inventory__no_such_function", {}))

    tools, paused, unknown = asyncio.run(scenario())
    assert "inventory__get_inventory" not in [t.name for t in tools.tools]
    assert paused.is_error and refusal(paused) == {"error_code": "DISABLED", "error_reason": "tool_paused"}
    assert "paused until" in paused.content[0].text  # the message says until when (no detail carries it)
    assert unknown.is_error and refusal(unknown) == {"error_code": "NOT_FOUND", "error_reason": "unknown_function"}


def _needs_approval(setup: Any) -> None:
    resp = setup.api.patch(f"/api/v1/tools/{setup.tool_id}/functions/get_inventory/", {"requires_approval": True},
                           format="json")
    assert resp.status_code == 200, resp.content


@pytest.mark.parametrize("transport", ["streamable_http", "sse"])
def test_approval_without_elicitation_names_the_pending_id_then_runs_once(
    served: Any, setup: Any, transport: str
) -> None:
    _needs_approval(setup)
    url = served.endpoint("acme", setup.agent_id)
    args = {"sku": "DEMO-001"}

    async def call() -> Any:
        async with connect(url, setup.token, transport=transport) as (session, _):
            return await session.call_tool("inventory__get_inventory", args)

    held = asyncio.run(call())
    assert held.is_error
    approval_id = refusal(held)["approval_id"]
    assert f"approval id {approval_id}" in held.content[0].text
    assert f"/api/v1/approvals/{approval_id}/approve/" in held.content[0].text
    approval = Approval.objects.get(pk=approval_id)
    assert approval.status == "pending" and approval.tool_call.via == "gateway"
    assert approval.tool_call.agent_id == setup.agent_id

    again = asyncio.run(call())  # not decided yet: the same pending request, nothing ran
    assert again.is_error and refusal(again)["approval_id"] == approval_id
    assert Approval.objects.count() == 1 and not ToolCall.objects.filter(status="ok").exists()

    resp = setup.api.post(f"/api/v1/approvals/{approval_id}/approve/")  # approving runs the call, once
    assert resp.status_code == 200, resp.content
    runs = ToolCall.objects.filter(function="get_inventory", via="gateway", approval__isnull=True)
    assert runs.count() == 1 and runs.get().status == "ok"
    ran = asyncio.run(call())  # the client asks again: it gets that run's result, nothing runs twice
    assert not ran.is_error and "DEMO-001" in ran.content[0].text
    assert ran.structured_content["sku"] == "DEMO-001"  # what the function's outputSchema promises
    assert runs.count() == 1

    third = asyncio.run(call())  # the approval was used up: a new request is held
    assert third.is_error and refusal(third)["approval_id"] != approval_id
    assert runs.count() == 1


def test_an_approved_result_too_large_to_keep_whole_is_said_so(served: Any, setup: Any, settings: Any) -> None:
    _needs_approval(setup)
    settings.TOOLHUB_AUDIT_RESULT_CHARS = 10  # the audit row keeps a cut excerpt: no structured result in it

    async def call() -> Any:
        async with connect(served.endpoint("acme", setup.agent_id), setup.token) as (session, _):
            return await session.call_tool("inventory__get_inventory", {"sku": "DEMO-001"})

    held = asyncio.run(call())
    assert setup.api.post(f"/api/v1/approvals/{refusal(held)['approval_id']}/approve/").status_code == 200
    ran = asyncio.run(call())  # the client's SDK would refuse a result without the promised structuredContent
    assert ran.is_error and ran.content[0].text.startswith("EXECUTION_ERROR: the call ran (call ")
    assert "structured result was not kept" in ran.content[0].text


def test_a_different_argument_does_not_use_the_approval(served: Any, setup: Any) -> None:
    _needs_approval(setup)
    url = served.endpoint("acme", setup.agent_id)

    async def call(sku: str) -> Any:
        async with connect(url, setup.token) as (session, _):
            return await session.call_tool("inventory__get_inventory", {"sku": sku})

    held = asyncio.run(call("DEMO-001"))
    setup.api.post(f"/api/v1/approvals/{refusal(held)['approval_id']}/approve/")
    other = asyncio.run(call("DEMO-002"))
    assert other.is_error and refusal(other)["approval_id"] != refusal(held)["approval_id"]


@pytest.mark.parametrize("accept", [True, False])
def test_approval_through_elicitation(served: Any, setup: Any, accept: bool) -> None:
    _needs_approval(setup)
    asked: list[Any] = []

    async def on_elicit(context: Any, params: Any) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"approve": accept})

    async def scenario() -> Any:
        async with connect(served.endpoint("acme", setup.agent_id), setup.token,
                           elicitation_callback=on_elicit) as (session, _):
            return await session.call_tool("inventory__get_inventory", {"sku": "DEMO-001"})

    result = asyncio.run(scenario())
    assert len(asked) == 1
    message = asked[0].message
    assert "inventory.get_inventory" in message and "DEMO-001" in message and "safety: WRITE" in message
    approval = Approval.objects.get()
    if accept:
        assert not result.is_error and "DEMO-001" in result.content[0].text
        assert approval.status == "approved" and approval.decided_by_id == setup.api.user.pk
        assert ToolCall.objects.filter(function="get_inventory", status="ok", approval__isnull=True).count() == 1
    else:
        assert result.is_error and "declined" in result.content[0].text
        assert approval.status == "denied"
        assert not ToolCall.objects.filter(approval__isnull=True, status="ok").exists()


def test_second_person_rule_falls_back_to_the_pending_id(served: Any, setup: Any) -> None:
    _needs_approval(setup)
    setup.tenant.approval_second_person = True
    setup.tenant.save(update_fields=["approval_second_person"])
    asked: list[Any] = []

    async def on_elicit(context: Any, params: Any) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"approve": True})

    async def scenario() -> Any:
        async with connect(served.endpoint("acme", setup.agent_id), setup.token,
                           elicitation_callback=on_elicit) as (session, _):
            return await session.call_tool("inventory__get_inventory", {"sku": "DEMO-001"})

    result = asyncio.run(scenario())
    assert not asked
    assert result.is_error and refusal(result)["approval_id"] == Approval.objects.get().pk


@pytest.mark.parametrize("transport", ["streamable_http", "sse"])
def test_list_changed_is_sent_when_the_toolset_changes(served: Any, setup: Any, transport: str) -> None:
    got = threading.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification) or getattr(
            getattr(message, "root", None), "method", None
        ) == "notifications/tools/list_changed":
            got.set()

    async def scenario() -> tuple[Any, Any, Any]:
        async with connect(served.endpoint("acme", setup.agent_id), setup.token, transport=transport,
                           message_handler=on_message) as (session, init):
            before = await session.list_tools()
            await asyncio.to_thread(_disable_echo_env, setup)
            await wait_until_async(got.is_set, scaled(60))  # the sweep runs every 0.2 s in tests
            after = await session.list_tools()
            return init, before, after

    init, before, after = asyncio.run(scenario())
    assert init.capabilities.tools.list_changed is True
    assert got.is_set()
    assert "inventory__echo_env" in [t.name for t in before.tools]
    assert "inventory__echo_env" not in [t.name for t in after.tools]


def _disable_echo_env(setup: Any) -> None:
    resp = setup.api.patch(f"/api/v1/tools/{setup.tool_id}/functions/echo_env/", {"enabled": False}, format="json")
    assert resp.status_code == 200, resp.content


def test_prompts_and_resources_are_offered_namespaced_and_read_only(served: Any, setup: Any) -> None:
    async def scenario() -> tuple[Any, Any, Any, Any]:
        async with connect(served.endpoint("acme", setup.agent_id), setup.token) as (session, init):
            prompts = await session.list_prompts()
            prompt = await session.get_prompt("inventory__stock_question", {"sku": "DEMO-001"})
            resources = await session.list_resources()
            read = await session.read_resource(str(resources.resources[0].uri))
            return init, prompts, prompt, (resources, read)

    init, prompts, prompt, (resources, read) = asyncio.run(scenario())
    assert init.capabilities.prompts is not None and init.capabilities.resources is not None
    assert [p.name for p in prompts.prompts] == ["inventory__stock_question"]
    assert "DEMO-001" in prompt.messages[0].content.text
    assert [r.name for r in resources.resources] == ["inventory__skus"]
    assert str(resources.resources[0].uri) == "toolhub://inventory/inventory%3A%2F%2Fskus"
    assert "DEMO-001" in read.contents[0].text
    assert str(read.contents[0].uri) == str(resources.resources[0].uri)
