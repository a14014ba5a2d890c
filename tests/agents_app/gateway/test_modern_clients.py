"""The SDK's dual-era `Client` against the gateway in `legacy`, `auto` and `2026-07-28` modes: approvals asked
at the client in every era, requestState sealed with keys from the settings, no session for a 2026 client."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx2
import mcp_types as types
import pytest
from django.core.cache import cache
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from core.outbound import ssl_context
from tests import loopback
from tests.agents_app.gateway.clients import refusal
from tests.agents_app.gateway.modern import MODERN, MODES, client
from tests.waiting import scaled, wait_until_async
from tools_app.models import Approval, ToolCall

# The test that lists the SDK-built inventory's prompts and resources (conftest's `inventory_server`); the others'
# inventory is MINI (the same tools without the SDK's start).
SDK_INVENTORY = {"test_discover_lists_and_cache_hints"}

pytestmark = pytest.mark.django_db(transaction=True)
CALL = ("inventory__get_inventory", {"sku": "DEMO-001"})


@pytest.fixture
def setup(listed_once: Any) -> Any:
    """The inventory's listing probed once for the module (conftest's `listed_once`): a test whose calls never reach
    the server starts none."""
    return listed_once


def _needs_approval(setup: Any) -> None:
    resp = setup.api.patch(f"/api/v1/tools/{setup.tool_id}/functions/get_inventory/", {"requires_approval": True},
                           format="json")
    assert resp.status_code == 200, resp.content


def _runs() -> Any:
    return ToolCall.objects.filter(function="get_inventory", via="gateway", approval__isnull=True)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("accept", [True, False])
def test_a_call_needing_approval_is_asked_at_the_client_in_every_mode(served: Any, setup: Any, mode: str,
                                                                       accept: bool) -> None:
    _needs_approval(setup)
    asked: list[Any] = []

    async def on_elicit(context: Any, params: Any) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"approve": accept})

    async def scenario() -> tuple[str, Any]:
        async with client(served.endpoint("acme", setup.agent_id), setup.token, mode=mode,
                          elicitation_callback=on_elicit) as connected:
            return connected.protocol_version, await connected.call_tool(*CALL)

    version, result = asyncio.run(scenario())
    assert (version == MODERN) is (mode != "legacy")
    assert len(asked) == 1
    assert "inventory.get_inventory" in asked[0].message and "DEMO-001" in asked[0].message
    approval = Approval.objects.get()
    if accept:
        assert not result.is_error and result.structured_content["sku"] == "DEMO-001"
        assert approval.status == "approved" and approval.decided_by_id == setup.api.user.pk
        assert _runs().count() == 1 and _runs().get().status == "ok"
    else:
        assert result.is_error and "declined" in result.content[0].text
        assert approval.status == "denied" and not _runs().exists()


def test_a_modern_client_that_cancels_gets_the_pending_approval(served: Any, setup: Any) -> None:
    _needs_approval(setup)

    async def on_elicit(context: Any, params: Any) -> types.ElicitResult:
        return types.ElicitResult(action="cancel")

    async def scenario() -> Any:
        async with client(served.endpoint("acme", setup.agent_id), setup.token,
                          elicitation_callback=on_elicit) as connected:
            return await connected.call_tool(*CALL)

    result = asyncio.run(scenario())
    approval = Approval.objects.get()
    assert result.is_error and refusal(result)["approval_id"] == approval.pk and approval.status == "pending"
    assert not _runs().exists()


def test_where_toolhub_alone_decides_a_modern_client_gets_the_pending_approval(served: Any, setup: Any) -> None:
    _needs_approval(setup)
    setup.tenant.gateway_approvals_in_toolhub_only = True
    setup.tenant.save(update_fields=["gateway_approvals_in_toolhub_only"])
    asked: list[Any] = []

    async def on_elicit(context: Any, params: Any) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"approve": True})

    async def call() -> Any:
        async with client(served.endpoint("acme", setup.agent_id), setup.token,
                          elicitation_callback=on_elicit) as connected:
            return await connected.call_tool(*CALL)

    held = asyncio.run(call())
    approval_id = refusal(held)["approval_id"]
    assert not asked and held.is_error and f"/api/v1/approvals/{approval_id}/approve/" in held.content[0].text
    assert setup.api.post(f"/api/v1/approvals/{approval_id}/approve/").status_code == 200
    ran = asyncio.run(call())  # approved in Toolhub: the next identical call gets that one run's result
    assert not ran.is_error and ran.structured_content["sku"] == "DEMO-001" and _runs().count() == 1


def test_a_modern_client_without_elicitation_gets_the_pending_approval(served: Any, setup: Any) -> None:
    _needs_approval(setup)

    async def call() -> Any:
        async with client(served.endpoint("acme", setup.agent_id), setup.token) as connected:
            return await connected.call_tool(*CALL)

    held = asyncio.run(call())
    assert held.is_error and refusal(held)["approval_id"] == Approval.objects.get().pk


async def _first_round(url: str, token: str) -> tuple[types.InputRequiredResult, Any]:
    async def on_elicit(context: Any, params: Any) -> types.ElicitResult:
        raise AssertionError("driven by hand")

    async with client(url, token, elicitation_callback=on_elicit) as connected:
        first = await connected.session.call_tool(*CALL, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult)
        return first, connected.protocol_version


def _accept() -> dict[str, Any]:
    return {"toolhub-approval": types.ElicitResult(action="accept", content={"approve": True})}


async def _retry(url: str, token: str, state: str, arguments: dict[str, Any] | None = None) -> Any:
    async def on_elicit(context: Any, params: Any) -> types.ElicitResult:
        raise AssertionError("driven by hand")

    async with client(url, token, elicitation_callback=on_elicit) as connected:
        try:
            return await connected.session.call_tool(CALL[0], arguments or CALL[1], input_responses=_accept(),
                                                     request_state=state, allow_input_required=True)
        except MCPError as refused:  # returned: raised, it would leave the client's task group as a group
            return refused


def _refused(outcome: Any) -> MCPError:
    assert isinstance(outcome, MCPError), outcome
    return outcome


def test_request_state_is_sealed_and_a_tampered_one_is_refused_typed(served: Any, setup: Any) -> None:
    _needs_approval(setup)
    url = served.endpoint("acme", setup.agent_id)
    first, _ = asyncio.run(_first_round(url, setup.token))
    state = first.request_state
    assert state is not None and "approval" not in state  # encrypted, not merely signed
    flipped = state[:-3] + ("A" if state[-3] != "A" else "B") + state[-2:]
    for bad in (flipped, "v1.bm9wZQ", "not-a-state"):
        refused = _refused(asyncio.run(_retry(url, setup.token, bad)))
        assert refused.error.data["code"] == "invalid_request_state" and "requestState" in refused.error.message
    # the seal binds the arguments: not replayable on another call
    other_args = _refused(asyncio.run(_retry(url, setup.token, state, {"sku": "DEMO-002"})))
    assert other_args.error.data["code"] == "invalid_request_state"
    assert not _runs().exists() and Approval.objects.get().status == "pending"
    done = asyncio.run(_retry(url, setup.token, state))
    assert not done.is_error and _runs().count() == 1


def test_request_state_of_one_member_is_refused_for_another(served: Any, setup: Any, member_client: Any) -> None:
    from tenants_app.models import Role
    from tenants_app.services import token_for_user

    _needs_approval(setup)
    url = served.endpoint("acme", setup.agent_id)
    first, _ = asyncio.run(_first_round(url, setup.token))
    other = token_for_user(user=member_client(setup.tenant, Role.ADMIN).user)
    refused = _refused(asyncio.run(_retry(url, other, first.request_state or "")))
    assert refused.error.data["code"] == "invalid_request_state"
    assert not _runs().exists()


def test_request_state_sealed_under_a_key_that_was_rotated_out_is_refused(served: Any, setup: Any,
                                                                          settings: Any) -> None:
    _needs_approval(setup)
    url = served.endpoint("acme", setup.agent_id)
    old = "o" * 44
    settings.TOOLHUB_MCP_REQUEST_STATE_KEYS = [old]
    first, _ = asyncio.run(_first_round(url, setup.token))
    settings.TOOLHUB_MCP_REQUEST_STATE_KEYS = ["n" * 44, old]  # rotation: the new key seals, the old one opens
    assert not asyncio.run(_retry(url, setup.token, first.request_state or "")).is_error
    settings.TOOLHUB_MCP_REQUEST_STATE_KEYS = ["n" * 44]  # the old key retired: its states no longer open
    second, _ = asyncio.run(_first_round(url, setup.token))
    settings.TOOLHUB_MCP_REQUEST_STATE_KEYS = ["m" * 44]
    refused = _refused(asyncio.run(_retry(url, setup.token, second.request_state or "")))
    assert refused.error.data["code"] == "invalid_request_state"


class _Alternating(httpx2.AsyncHTTPTransport):
    """Sends each request to the next of several servers, as a round-robin balancer does."""

    def __init__(self, ports: list[int]) -> None:
        super().__init__(verify=ssl_context())  # the process's one context (httpx2's default loads the CA bundle)
        self.ports, self.sent = ports, [0] * len(ports)
        self.session_ids: list[str] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        turn = sum(self.sent) % len(self.ports)
        self.sent[turn] += 1
        request.url = request.url.copy_with(port=self.ports[turn])
        response = await super().handle_async_request(request)
        if "mcp-session-id" in response.headers:
            self.session_ids.append(response.headers["mcp-session-id"])
        return response


def test_two_gateways_answer_one_modern_clients_alternating_requests(served_pair: Any, setup: Any,
                                                                     settings: Any) -> None:
    _needs_approval(setup)
    first, second = served_pair
    ports = [int(s.base_url.rsplit(":", 1)[1]) for s in served_pair]
    balancer = _Alternating(ports)
    settings.TOOLHUB_MCP_MAX_SESSIONS_PER_MEMBER = 0  # a 2026 client holds no session: no cap applies to it
    settings.TOOLHUB_MCP_MAX_SESSIONS_PER_TOKEN = 0
    asked: list[Any] = []

    async def on_elicit(context: Any, params: Any) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"approve": True})

    async def scenario() -> tuple[Any, Any, Any]:
        async with loopback.async_client(transport=balancer, headers={"Authorization": f"Bearer {setup.token}"},
                                         timeout=httpx2.Timeout(30, read=300)) as http:
            transport = streamable_http_client(first.endpoint("acme", setup.agent_id), http_client=http)
            async with Client(transport, mode="auto", elicitation_callback=on_elicit) as connected:
                listed = await connected.list_tools()
                approved = await connected.call_tool(*CALL)
                plain = await connected.call_tool("inventory__whoami", {})
                return listed, approved, plain

    listed, approved, plain = asyncio.run(scenario())
    assert all(sent >= 2 for sent in balancer.sent), balancer.sent  # both answered, the rounds alternating
    assert not balancer.session_ids  # no Mcp-Session-Id handed out
    assert "inventory__get_inventory" in [t.name for t in listed.tools]
    assert len(asked) == 1 and not approved.is_error and _runs().count() == 1
    assert not plain.is_error
    assert _session_keys() == []


def _session_keys() -> list[str]:
    """Every gateway session record in the cache: LocMem's dict (embedded default) or Redis (CI's second pass)."""
    store = getattr(cache, "_cache", None)
    if isinstance(store, dict):
        return [str(k) for k in store if "mcp-session" in str(k)]
    redis_client = store.get_client(None)  # type: ignore[union-attr]
    return [str(k) for k in redis_client.scan_iter(match="*mcp-session*")]


def test_discover_lists_and_cache_hints(served: Any, setup: Any) -> None:
    async def scenario() -> tuple[Any, Any, Any, Any]:
        async with client(served.endpoint("acme", setup.agent_id), setup.token, mode="auto") as connected:
            discovered = await connected.session.discover()
            tools = await connected.list_tools(cache_mode="bypass")
            prompts = await connected.list_prompts(cache_mode="bypass")
            resources = await connected.list_resources(cache_mode="bypass")
            return discovered, tools, prompts, resources

    discovered, tools, prompts, resources = asyncio.run(scenario())
    assert MODERN in discovered.supported_versions
    assert discovered.capabilities.tools is not None and discovered.capabilities.tools.list_changed is True
    assert discovered.instructions == "Answers stock questions for the warehouse team."
    for listed in (tools, prompts, resources):
        assert listed.ttl_ms == 30000 and listed.cache_scope == "private"
    names = [t.name for t in tools.tools]
    assert names == sorted(names)


def _disable_function(setup: Any) -> None:
    resp = setup.api.patch(f"/api/v1/tools/{setup.tool_id}/functions/echo_env/", {"enabled": False}, format="json")
    assert resp.status_code == 200, resp.content


def _narrow_link(setup: Any) -> None:
    resp = setup.api.patch(f"/api/v1/agents/{setup.agent_id}/", {"tools": [
        {"tool": setup.tool_id, "allowed_functions": ["get_inventory", "whoami"]}]}, format="json")
    assert resp.status_code == 200, resp.content


def _disable_tool(setup: Any) -> None:
    resp = setup.api.put(f"/api/v1/tools/{setup.tool_id}/status/", {"status": "DISABLED"}, format="json")
    assert resp.status_code == 200, resp.content


@pytest.mark.parametrize("change", [_disable_function, _narrow_link, _disable_tool])
def test_a_listening_client_hears_its_list_change(served: Any, setup: Any, change: Any) -> None:
    async def scenario() -> tuple[Any, Any, Any, Any]:
        async with client(served.endpoint("acme", setup.agent_id), setup.token) as connected:
            before = await connected.list_tools()
            async with connected.listen(tools_list_changed=True) as subscription:
                honored = subscription.honored
                await asyncio.to_thread(change, setup)
                event = await asyncio.wait_for(subscription.__anext__(), 30)
            after = await connected.list_tools()  # the event evicted the client's cached listing
            return honored, event, before, after

    honored, event, before, after = asyncio.run(scenario())
    assert honored.tools_list_changed is True
    assert type(event).__name__ == "ToolsListChanged"
    assert "inventory__echo_env" in [t.name for t in before.tools]
    assert "inventory__echo_env" not in [t.name for t in after.tools]


def test_a_change_that_leaves_the_listing_as_it_was_is_not_sent(served: Any, setup: Any) -> None:
    async def scenario() -> list[Any]:
        heard: list[Any] = []
        async with client(served.endpoint("acme", setup.agent_id), setup.token) as connected:
            async with connected.listen(tools_list_changed=True) as subscription:
                async def take() -> None:
                    async for event in subscription:
                        heard.append(event)

                taking = asyncio.create_task(take())
                # The agent's description changes (its tenant's generation moves), its listing does not ...
                await asyncio.to_thread(lambda: setup.api.patch(
                    f"/api/v1/agents/{setup.agent_id}/", {"system_prompt": "Be brief."}, format="json"))
                await asyncio.to_thread(_disable_function, setup)  # ... then it does: one event, for this one
                await wait_until_async(lambda: heard)
                taking.cancel()
        return heard

    assert len(asyncio.run(scenario())) == 1


@pytest.fixture
def lists_over_redis(settings: Any) -> None:
    """Changes reach listen streams only through Redis pub/sub (db 5 of the machine's Redis), as between the
    web processes of a deployment: no in-process shortcut is registered then."""
    settings.REDIS_URL = "redis://127.0.0.1:6379/5"


def test_a_change_reaches_listeners_on_every_process_through_redis(lists_over_redis: None, own_served_pair: Any,
                                                                   setup: Any) -> None:
    from core import hotcache

    served_pair = own_served_pair  # built after lists_over_redis: their gateways start with REDIS_URL set
    first, second = served_pair
    assert first.app is not second.app and len(hotcache._on_change) >= 2

    async def listen_on(served: Any) -> Any:
        async with client(served.endpoint("acme", setup.agent_id), setup.token) as connected:
            async with connected.listen(tools_list_changed=True) as subscription:
                ready.release()
                return await asyncio.wait_for(subscription.__anext__(), 30)

    ready = asyncio.Semaphore(0)

    async def scenario() -> list[Any]:
        listeners = [asyncio.create_task(listen_on(s)) for s in served_pair]
        for _ in listeners:
            await ready.acquire()
        await asyncio.to_thread(_disable_function, setup)
        return list(await asyncio.gather(*listeners))

    heard = asyncio.run(scenario())
    assert [type(e).__name__ for e in heard] == ["ToolsListChanged", "ToolsListChanged"]


def _modern_post(url: str, token: str, body: dict[str, Any], **headers: str) -> httpx2.Response:
    return loopback.post(url, json=body, timeout=scaled(60), headers={
        "Accept": "application/json, text/event-stream", "Authorization": f"Bearer {token}",
        "Mcp-Protocol-Version": MODERN, **headers})


def _envelope(method: str, params: dict[str, Any]) -> dict[str, Any]:
    meta = {types.PROTOCOL_VERSION_META_KEY: MODERN, types.CLIENT_CAPABILITIES_META_KEY: {}}
    return {"jsonrpc": "2.0", "id": 7, "method": method, "params": {**params, "_meta": meta}}


def test_routing_headers_that_disagree_with_the_body_are_refused(served: Any, setup: Any) -> None:
    url = served.endpoint("acme", setup.agent_id)
    body = _envelope("tools/call", {"name": "inventory__whoami", "arguments": {}})
    agreeing = _modern_post(url, setup.token, body, **{"Mcp-Method": "tools/call", "Mcp-Name": "inventory__whoami"})
    assert agreeing.status_code == 200 and "error" not in agreeing.json(), agreeing.text
    for headers in ({"Mcp-Method": "tools/list", "Mcp-Name": "inventory__whoami"},
                    {"Mcp-Method": "tools/call", "Mcp-Name": "inventory__echo_env"}):
        refused = _modern_post(url, setup.token, body, **headers)
        assert refused.status_code == 400
        assert refused.json()["error"]["code"] == types.HEADER_MISMATCH
        assert "header does not match the request body" in refused.json()["error"]["message"]
    assert ToolCall.objects.filter(function="whoami").count() == 1  # the refused ones never ran
