"""tools_app.policies: each question has one policy whose queryset side and why_not side agree, checked on a
grid of users, tools, functions and agents (and, for calls, with what toolset assembly offers)."""

from __future__ import annotations

from datetime import timedelta
from itertools import product
from typing import Any

import pytest
from django.contrib.auth.models import AnonymousUser
from django.utils import timezone
from guardian.shortcuts import assign_perm

from agents_app.models import Agent, AgentStatus, AgentTool
from agents_app.toolsets import build_toolset
from tenants_app.models import Role
from tenants_app.policies import MEMBERS
from tests.factories import MembershipFactory, ToolFactory, UserFactory
from tools_app.models import (
    Approval,
    ApprovalVia,
    CallStatus,
    FunctionState,
    Tool,
    ToolCall,
    ToolFunction,
    ToolStatus,
)
from tools_app.policies import CALLS, DECIDERS, approvals_decidable
from tools_app.services.approvals import may_decide

pytestmark = pytest.mark.django_db

FUNCTIONS = {  # name -> (state, enabled, unsupported_reason)
    "active": (FunctionState.ACTIVE, True, ""),
    "changed": (FunctionState.CHANGED, True, ""),
    "removed": (FunctionState.REMOVED, True, ""),
    "disabled": (FunctionState.ACTIVE, False, ""),
    "needs_task": (FunctionState.ACTIVE, True, "requires MCP tasks"),
}


def _tool(tenant: Any, name: str, **fields: Any) -> Tool:
    tool = ToolFactory(tenant=tenant, name=name, **fields)
    for fn, (state, enabled, unsupported) in FUNCTIONS.items():
        ToolFunction.objects.create(tool=tool, name=fn, schema_hash=fn, state=state, enabled=enabled,
                                    unsupported_reason=unsupported, input_schema={"type": "object"})
    return tool


@pytest.fixture
def world(tenant: Any, other_tenant: Any) -> dict[str, Any]:
    users: dict[str, Any] = {role.value: MembershipFactory(tenant=tenant, role=role).user for role in Role}
    users["granted"] = MembershipFactory(tenant=tenant, role=Role.MEMBER).user
    users["stranger"] = MembershipFactory(tenant=other_tenant, role=Role.OWNER).user
    users["operator"] = UserFactory(is_superuser=True)
    users["anonymous"] = AnonymousUser()
    tools = {
        "open": _tool(tenant, "open"),
        "off": _tool(tenant, "off", status=ToolStatus.DISABLED),
        "paused": _tool(tenant, "paused", disabled_until=timezone.now() + timedelta(minutes=5), consecutive_failures=3),
        "granted": _tool(tenant, "granted"),
        "foreign": _tool(other_tenant, "foreign"),
    }
    assign_perm("tools_app.use_tool", users["granted"], tools["granted"])
    agents: dict[str, Any] = {"none": None}
    links_of: dict[str, dict[str, list[str] | None]] = {"all": {"open": None, "granted": None, "paused": None},
                                                        "narrow": {"open": ["active", "disabled"]},
                                                        "private": {"open": None},
                                                        "off": {"open": None}}
    for name, links in links_of.items():
        agent = Agent.objects.create(tenant=tenant, name=name,
                                     status=AgentStatus.DISABLED if name == "off" else AgentStatus.ENABLED)
        for tool_name, allowed in links.items():
            AgentTool.objects.create(agent=agent, tool=tools[tool_name], allowed_functions=allowed)
        agents[name] = agent
    assign_perm("agents_app.use_agent", users["granted"], agents["private"])
    return {"tenant": tenant, "users": users, "tools": tools, "agents": agents}


def test_calls_both_sides_agree_on_the_grid(world: Any) -> None:
    tenant = world["tenant"]
    seen: set[str] = set()
    cases = 0
    for (who, user), (agent_name, agent) in product(world["users"].items(), world["agents"].items()):
        allowed = {(f.tool_id, f.name) for f in CALLS.functions(tenant=tenant, user=user, agent=agent)}
        for (tool_name, tool), fn in product(world["tools"].items(), [*FUNCTIONS, "missing"]):
            if tool.tenant_id != tenant.pk:
                assert (tool.pk, fn) not in allowed  # another tenant's functions are never callable here
                continue
            refusal = CALLS.why_not(tenant=tenant, user=user, tool=tool, function=fn, agent=agent)
            warm = CALLS.why_not(tenant=tenant, user=user, tool=tool, function=fn, agent=agent, warm=True)
            where = (who, agent_name, tool_name, fn)
            assert ((tool.pk, fn) in allowed) == (refusal is None), (where, refusal)
            assert (warm and warm.reason) == (refusal and refusal.reason), where  # memory and database agree
            seen.add(refusal.reason if refusal else "callable")
            cases += 1
    # The grid reaches every kind of answer, so the agreement is not vacuous.
    assert seen == {"callable", "tool_disabled", "tool_paused", "not_a_member", "role_too_low", "tool_not_usable",
                    "function_missing", "function_changed", "function_disabled", "function_unsupported",
                    "agent_not_usable", "function_not_allowed"}, seen
    assert cases == len(world["users"]) * len(world["agents"]) * 4 * (len(FUNCTIONS) + 1)


def test_toolset_assembly_offers_what_the_call_policy_allows(world: Any) -> None:
    """Chat and the gateway offer an agent's functions through toolset assembly: for anyone who may call,
    exactly the functions CALLS allows through that agent (a function Toolhub cannot call is listed as left
    out, with why)."""
    tenant = world["tenant"]
    for (who, user), agent_name in product(world["users"].items(), ("all", "narrow")):
        if not MEMBERS.allows(tenant=tenant, user=user):
            continue
        agent = Agent.objects.prefetch_related("agent_tools").get(pk=world["agents"][agent_name].pk)
        toolset = build_toolset(tenant=tenant, actor=user, agent=agent)
        offered = {(f.tool_id, f.function) for f in toolset}
        allowed = {(f.tool_id, f.name) for f in CALLS.functions(tenant=tenant, user=user, agent=agent)}
        assert offered == allowed, (who, agent_name)
        assert all(item["reason"] == "requires MCP tasks" for item in toolset.left_out)


def test_why_not_rights_ignores_the_tools_state_but_not_the_caller(world: Any) -> None:
    tenant, users, tools = world["tenant"], world["users"], world["tools"]
    assert CALLS.why_not_rights(tenant=tenant, user=users["member"], tool=tools["off"], function="active") is None
    assert CALLS.why_not_rights(tenant=tenant, user=users["viewer"], tool=tools["open"],
                                function="active").reason == "role_too_low"  # type: ignore[union-attr]
    assert CALLS.why_not_rights(tenant=tenant, user=users["member"], tool=tools["granted"],
                                function="active").reason == "tool_not_usable"  # type: ignore[union-attr]
    assert CALLS.why_not_rights(tenant=tenant, user=users["member"], tool=tools["open"], function="changed",
                                agent=world["agents"]["narrow"]).reason == "function_not_allowed"  # type: ignore[union-attr]


def test_deciders_both_sides_agree_on_the_grid(world: Any) -> None:
    tenant, users = world["tenant"], world["users"]
    tool = world["tools"]["open"]
    approvals = []
    for asker in ("member", "admin", "owner"):
        call = ToolCall.objects.create(tenant=tenant, tool=tool, tool_name=tool.name, function="active",
                                       actor=users[asker], status=CallStatus.AWAITING_APPROVAL)
        approvals.append(Approval.objects.create(tenant=tenant, tool_call=call, requested_by=users[asker],
                                                 via=ApprovalVia.INVOKE, expires_at=timezone.now()))
    outcomes = set()
    for admins_can_approve, second_person in product((False, True), repeat=2):
        tenant.admins_can_approve, tenant.approval_second_person = admins_can_approve, second_person
        tenant.save()
        for who, user in users.items():
            decidable = set(approvals_decidable(tenant=tenant, user=user).values_list("pk", flat=True))
            assert decidable == set(DECIDERS.approvals(tenant=tenant, user=user).values_list("pk", flat=True))
            for approval in approvals:
                why = DECIDERS.why_not(tenant=tenant, user=user, approval=approval)
                where = (admins_can_approve, second_person, who, approval.requested_by_id)
                assert (approval.pk in decidable) == (why is None), (where, why)
                assert may_decide(tenant=tenant, actor=user, approval=approval) == (why is None, why or "")
                outcomes.add(why is None)
    assert outcomes == {True, False}
