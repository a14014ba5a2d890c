"""Toolsets, a read: which functions a caller is offered, and which of them one chat turn shows the model.

One pipeline, build → route → cap: `build_toolset` (the agent's linked functions this user may use) or
`caller_toolset` (every function the caller may use, for the route API without an agent); `turn_toolset` then
narrows a chat turn to its matched intents (an agent with intent routing) and caps it at the model's limit.
Chat takes all three steps; the MCP gateway and the route API take the build alone (a gateway client lists
everything and finds the rest with tool search; the route API shows matches, not an offer).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.utils import timezone

from agents_app import selectors
from agents_app.intents.routing import route_turn
from agents_app.models import Agent
from agents_app.runtime.loop import Event
from agents_app.runtime.model_client import ModelConfig
from agents_app.runtime.toolset import AgentLink, Toolset, assemble
from tenants_app.models import Tenant
from tools_app.policies import USE_TOOL


def build_toolset(*, tenant: Tenant, actor: Any, agent: Agent) -> Toolset:
    """The agent's linked functions this user may use, with approval flags from the tools' own policy."""
    links = list(agent.agent_tools.all())
    tool_ids = [link.tool_id for link in links]
    usable = set(USE_TOOL.tools(tenant=tenant, user=actor).filter(pk__in=tool_ids).values_list("pk", flat=True))
    candidates = selectors.function_candidates(tenant=tenant, tool_ids=tool_ids)
    # Each function's needs_approval comes from tools_app's one approval rule, applied inside assembly.
    return assemble(
        tenant_id=tenant.pk,
        candidates=candidates,
        links=[AgentLink(link.tool_id, None if link.allowed_functions is None else frozenset(link.allowed_functions),
                         link.requires_approval) for link in links],
        usable_tool_ids=usable,
        now=timezone.now(),
    )


def caller_toolset(*, tenant: Tenant, actor: Any) -> Toolset:
    """Every function the caller may use (enabled tools they may use, active and enabled functions)."""
    tool_ids = list(USE_TOOL.tools(tenant=tenant, user=actor).values_list("pk", flat=True))
    candidates = selectors.function_candidates(tenant=tenant, tool_ids=tool_ids)
    return assemble(tenant_id=tenant.pk, candidates=candidates, usable_tool_ids=set(tool_ids), now=timezone.now())


def model_tool_limit(model: ModelConfig) -> int:
    """The functions one request may offer: the model's `max_tools` when it sets a whole number, else the
    deployment's TOOLHUB_MODEL_TOOL_LIMIT (128 unless set). The one place the limit is decided; intent routing
    caps its fallback with it too."""
    default = int(settings.TOOLHUB_MODEL_TOOL_LIMIT)
    try:
        limit = int(model.params.get("max_tools", default))
    except (TypeError, ValueError):
        return default
    return limit if limit > 0 else default


@dataclass(frozen=True)
class TurnToolset:
    """What one chat turn offers the model, and the events that tell the client how it was chosen."""

    toolset: Toolset
    events: tuple[Event, ...] = ()  # intent.routed, toolset.limited: sent before the loop's own events


def turn_toolset(*, tenant: Tenant, actor: Any, agent: Agent, model: ModelConfig, question: str) -> TurnToolset:
    """build → route → cap: the agent's toolset for this user, narrowed to the question's intents when the agent
    routes by intent, then within the model's limit (what was left out, and why, said in `toolset.limited`)."""
    limit = model_tool_limit(model)
    toolset, routed = route_turn(tenant=tenant, actor=actor, agent=agent, question=question, limit=limit,
                                 toolset=build_toolset(tenant=tenant, actor=actor, agent=agent))
    events: list[Event] = [("intent.routed", routed)] if routed is not None else []
    toolset = toolset.capped(limit)
    if toolset.left_out:
        events.append(("toolset.limited", {"offered": len(toolset), "limit": limit,
                                           "left_out": list(toolset.left_out)}))
    return TurnToolset(toolset=toolset, events=tuple(events))
