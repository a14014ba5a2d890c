"""A warm chat turn reads its agent, permissions, toolset and linked tools from memory (core.hotcache): only the
conversation's own rows are read and written. Every change that alters what the turn may use holds on the very
next turn."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from guardian.shortcuts import assign_perm

from agents_app.models import Agent
from tenants_app.models import Membership, Role
from tests.agents_app.support import chat, events, inventory_tool, make_agent, make_model
from tests.fixtures.fake_llm import call, text

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("close_pool")]
INV = "inventory__get_inventory"
# What the turn's agent, its permission checks and its toolset read, by the table a query reads FROM.
PER_TURN = ('FROM "agents_app_agent"', 'FROM "agents_app_agenttool"', 'FROM "tenants_app_membership"',
            'FROM "guardian_', 'FROM "tools_app_tool"', 'FROM "tools_app_toolfunction"')


@pytest.fixture
def member(tenant: Any, member_client: Any) -> Any:
    return member_client(tenant, Role.MEMBER)


@pytest.fixture
def agent(api: Any, start_llm: Any) -> tuple[int, int, Any]:
    llm = start_llm([text("fine")], repeat_last=True)
    tool_id = inventory_tool(api)
    return make_agent(api, model=make_model(api, llm), tools=[{"tool": tool_id}]), tool_id, llm


def turn(client: Any, agent_id: int, conversation: dict[str, int], status: int = 200) -> dict[str, Any]:
    body = chat(client, agent_id, "hello?", conversation_id=conversation.get("id"), status=status)
    if status == 200:
        conversation["id"] = body["conversation_id"]
    return body


def test_a_warm_turn_reads_only_its_conversation(member: Any, agent: tuple[int, int, Any]) -> None:
    agent_id, _tool, _llm = agent
    conversation: dict[str, int] = {}
    turn(member, agent_id, conversation)
    with CaptureQueriesContext(connection) as ctx:
        body = turn(member, agent_id, conversation)
    assert body["status"] == "completed" and body["message"] == "fine"
    queries = [q["sql"] for q in ctx.captured_queries]
    assert [q for q in queries if any(table in q for table in PER_TURN)] == [], queries
    statements = [q for q in queries if q not in ("BEGIN IMMEDIATE", "BEGIN", "COMMIT")]
    # The claim (the conversation locked and marked running) and the persist (locked again, messages, status).
    assert len(statements) == 5, statements


def test_a_warm_turn_calling_a_tool_reads_the_generations_once_more(
        tenant: Any, member: Any, agent: tuple[int, int, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """The turn reads the hot-cache generations once; its tool call reads them afresh (a change made meanwhile
    holds), the identities' and the tenant's together in one read rather than one each."""
    from core import hotcache

    agent_id, _tool, llm = agent
    conversation: dict[str, int] = {}
    llm.repeat_last = False
    llm.script += [call(INV, {"sku": "DEMO-001"}), text("twelve")]
    turn(member, agent_id, conversation)
    reads: list[tuple[str, ...]] = []
    # Every generations read goes through hotcache._get_many: alone, or on Redis with the throttle's count riding in
    # the same pipeline (core.throttle.counted_ahead), which the cache backend's get_many never sees.
    real = hotcache._get_many

    def get_many(keys: list[str]) -> Any:
        reads.append(tuple(sorted(str(key).rsplit("gen:", 1)[1] for key in keys)))
        return real(keys)

    monkeypatch.setattr(hotcache, "_get_many", get_many)
    llm.script += [call(INV, {"sku": "DEMO-001"}), text("twelve")]
    body = turn(member, agent_id, conversation)
    assert body["status"] == "completed" and body["message"] == "twelve", body
    # The turn's read, then its one tool call's: each the identities' and the tenant's generation together.
    assert reads == [("auth", f"tenant:{tenant.pk}")] * 2, reads


def test_an_agent_disabled_or_unlinked_holds_on_the_next_turn(api: Any, member: Any,
                                                             agent: tuple[int, int, Any]) -> None:
    agent_id, tool_id, llm = agent
    conversation: dict[str, int] = {}
    llm.script[:0] = [call(INV, {"sku": "DEMO-001"}), text("twelve")]
    assert events(turn(member, agent_id, conversation), "tool.result")[0]["success"]
    assert api.patch(f"/api/v1/agents/{agent_id}/", {"tools": []}, format="json").status_code == 200
    llm.script[:0] = [call(INV, {"sku": "DEMO-001"}), text("none")]
    result = events(turn(member, agent_id, conversation), "tool.result")[0]
    assert not result["success"]  # no longer offered: the loop refuses a function outside the toolset
    assert api.patch(f"/api/v1/agents/{agent_id}/", {"status": "DISABLED"}, format="json").status_code == 200
    resp = member.post(f"/api/v1/agents/{agent_id}/chat/", {"message": "hi", "conversation_id": conversation["id"]},
                       format="json")
    assert resp.status_code >= 400 and resp.json()["error"]["code"] == "agent_disabled", resp.content


def test_a_disabled_tool_is_not_offered_on_the_next_turn(api: Any, member: Any, agent: tuple[int, int, Any]) -> None:
    agent_id, tool_id, llm = agent
    conversation: dict[str, int] = {}
    turn(member, agent_id, conversation)
    assert INV in {t["function"]["name"] for t in llm.requests[-1]["tools"]}
    assert api.put(f"/api/v1/tools/{tool_id}/status/", {"status": "DISABLED"}, format="json").status_code == 200
    turn(member, agent_id, conversation)
    assert INV not in {t["function"]["name"] for t in llm.requests[-1].get("tools") or []}


def test_a_grant_to_someone_else_or_a_demotion_holds_on_the_next_turn(tenant: Any, member_client: Any,
                                                                      member: Any, agent: tuple[int, int, Any]) -> None:
    agent_id, _tool, _llm = agent
    other = member_client(tenant, Role.MEMBER)
    conversation: dict[str, int] = {}
    turn(member, agent_id, conversation)
    assign_perm("agents_app.use_agent", other.user, Agent.objects.get(pk=agent_id))  # now restricted to `other`
    resp = member.post(f"/api/v1/agents/{agent_id}/chat/", {"message": "hi", "conversation_id": conversation["id"]},
                       format="json")
    assert resp.status_code == 403 and "no use_agent permission" in resp.json()["error"]["message"], resp.content
    assert turn(other, agent_id, {})["status"] == "completed"
    membership = Membership.objects.get(user=other.user, tenant=tenant)
    membership.role = Role.VIEWER
    membership.save()
    assert other.post(f"/api/v1/agents/{agent_id}/chat/", {"message": "hi"}, format="json").status_code == 403
