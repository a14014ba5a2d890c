"""The agent half of tools_app.policies.CALLS: a call through an agent needs the agent (enabled, `use_agent`)
and its link to allow the function (tools_app.runtime.call_rules.link_refusal, which toolset assembly applies
too). Plugged in by the setting TOOLHUB_AGENT_CALL_RULE: tools import no agents."""

from __future__ import annotations

from typing import Any

from django.db.models import Q

from agents_app import selectors
from agents_app.models import Agent, AgentTool
from core.codes import Reason
from tenants_app.models import Tenant
from tools_app.models import Tool
from tools_app.runtime import call_rules
from tools_app.runtime.call_rules import Refusal


class AgentCallRule:
    def why_not(self, *, tenant: Tenant, user: Any, agent: Agent, tool: Tool, function: str) -> Refusal | None:
        if not selectors.agent_may_use(tenant=tenant, user=user, agent=agent):
            return Refusal(Reason.AGENT_NOT_USABLE,
                           f"you may not use agent {agent.name!r} (disabled, or no use_agent permission)")
        link = AgentTool.objects.filter(agent=agent, tool=tool).first()
        return call_rules.link_refusal(agent_name=agent.name, tool_name=tool.name, function=function,
                                       linked=link is not None,
                                       allowed_functions=link.allowed_functions if link is not None else None)

    def allowed(self, *, tenant: Tenant, user: Any, agent: Agent) -> Q:
        nothing = Q(pk__in=[])
        if not selectors.agent_may_use(tenant=tenant, user=user, agent=agent):
            return nothing
        allowed = nothing
        for tool_id, functions in AgentTool.objects.filter(agent=agent).values_list("tool_id", "allowed_functions"):
            allowed |= Q(tool_id=tool_id) if functions is None else Q(tool_id=tool_id, name__in=list(functions))
        return allowed


AGENT_CALLS = AgentCallRule()
