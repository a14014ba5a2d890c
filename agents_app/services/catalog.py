"""Chat model and agent writes: API keys encrypted and write-only, tool links checked against the tenant."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import transaction

from agents_app import selectors
from agents_app.errors import AgentError, ModelInUse, UnknownFunctions
from agents_app.models import Agent, AgentRouting, AgentStatus, AgentTool, ChatModel
from agents_app.runtime.model_client import RESERVED_PARAMS
from agents_app.services.intents import lookup_refs
from core import names
from core.secrets import KEEP, MASK, require_secrets_on_move
from tenants_app.models import Role, Tenant
from tenants_app.permissions import ensure_role
from tools_app.configs.base import check_http_url
from tools_app.errors import ToolNotFound
from tools_app.models import Tool, ToolFunction

MAX_STEPS_RANGE = (1, 50)



@dataclass
class ChatModelInput:
    name: str | None = None
    base_url: str | None = None
    model: str | None = None
    api_key: Any = KEEP  # KEEP (omitted or "********"), None/"" clears, a string sets
    params: dict[str, Any] | None = None


@dataclass
class ToolLink:
    tool: int
    allowed_functions: list[str] | None = None
    requires_approval: bool | None = None


TOOL_SEARCH_CHOICES = ("auto", "on", "off")


@dataclass
class AgentInput:
    name: str | None = None
    description: str | None = None
    system_prompt: str | None = None
    model: Any = KEEP  # KEEP, None (no model) or a ChatModel id
    max_steps: int | None = None
    status: str | None = None
    tools: list[ToolLink] | None = None  # None keeps the links; a list replaces them
    routing: str | None = None
    routing_threshold: Any = KEEP
    knowledge_function: str | None = None
    always_on: list[str] | None = None
    tool_search: str | None = None


def _check_name(name: Any, what: str) -> str:
    return names.check_name(name, what=what, error=AgentError)


# --- chat models ----------------------------------------------------------------------------------


def _check_base_url(url: Any) -> str:
    try:
        return check_http_url(url if isinstance(url, str) else "")  # the one http(s) URL rule
    except ValueError as exc:
        raise AgentError(f"base_url {exc}", details={"field": "base_url"}) from None


def _check_params(params: Any) -> dict[str, Any]:
    if not isinstance(params, dict):
        raise AgentError("params must be a JSON object", details={"field": "params"})
    reserved = sorted(set(params) & RESERVED_PARAMS)
    if reserved:
        raise AgentError(
            f"params may not set {', '.join(reserved)}: the agent loop owns them",
            details={"field": "params", "reserved": sorted(RESERVED_PARAMS)},
        )
    return params


def _apply_key(model: ChatModel, api_key: Any) -> None:
    if api_key is KEEP or api_key == MASK:
        return
    if api_key in (None, ""):
        model.api_key = None
    elif isinstance(api_key, str):
        model.api_key = api_key
    else:
        raise AgentError("api_key must be a string", details={"field": "api_key"})


@transaction.atomic
def chat_model_create(*, tenant: Tenant, actor: Any, data: ChatModelInput) -> ChatModel:
    """Register an OpenAI-compatible endpoint; the key is stored encrypted and never shown again."""
    ensure_role(tenant=tenant, user=actor, at_least=Role.ADMIN)
    if data.api_key == MASK:
        raise AgentError(f"api_key is {MASK!r} but a new model has no stored key to keep", details={"field": "api_key"})
    if not data.model:
        raise AgentError("model is required (the model name the endpoint serves)", details={"field": "model"})
    model = ChatModel(
        tenant=tenant,
        name=_check_name(data.name, "model"),
        base_url=_check_base_url(data.base_url),
        model=data.model,
        params=_check_params(data.params if data.params is not None else {}),
    )
    _apply_key(model, data.api_key)
    names.save_unique_name(model, what="model")
    return model


@transaction.atomic
def chat_model_update(*, tenant: Tenant, actor: Any, model_id: Any, changes: ChatModelInput) -> ChatModel:
    """Change fields; an omitted or masked api_key keeps the stored one."""
    ensure_role(tenant=tenant, user=actor, at_least=Role.ADMIN)
    model = selectors.chat_model_get(tenant=tenant, model_id=model_id, for_update=True)
    if changes.name is not None:
        model.name = _check_name(changes.name, "model")
    if changes.base_url is not None:
        new_url = _check_base_url(changes.base_url)
        keeps_key = (changes.api_key is KEEP or changes.api_key == MASK) and bool(model.api_key)
        require_secrets_on_move(old_url=model.base_url, new_url=new_url, kept=["api_key"] if keeps_key else [],
                                field="base_url")
        model.base_url = new_url
    if changes.model is not None:
        if not changes.model:
            raise AgentError("model must not be empty", details={"field": "model"})
        model.model = changes.model
    if changes.params is not None:
        model.params = _check_params(changes.params)
    _apply_key(model, changes.api_key)
    names.save_unique_name(model, what="model")
    return model


@transaction.atomic
def chat_model_delete(*, tenant: Tenant, actor: Any, model_id: Any) -> None:
    """Delete a model no agent uses."""
    ensure_role(tenant=tenant, user=actor, at_least=Role.ADMIN)
    model = selectors.chat_model_get(tenant=tenant, model_id=model_id, for_update=True)
    users = list(Agent.objects.filter(tenant=tenant, model=model).values_list("name", flat=True))
    if users:
        raise ModelInUse(
            f"model {model.name!r} is used by agent(s) {', '.join(sorted(users))}; point them elsewhere first",
            details={"agents": sorted(users)},
        )
    model.delete()


# --- agents ---------------------------------------------------------------------------------------


def _check_links(tenant: Tenant, links: list[ToolLink]) -> list[ToolLink]:
    """Every tool must be this tenant's: one foreign or missing id fails the whole write as not found.

    `allowed_functions` must name functions the tool is known to offer (any state: a function the server
    dropped may stay on a link), so a misspelt name is refused instead of silently allowing nothing.
    """
    ids = [link.tool for link in links]
    if len(set(ids)) != len(ids):
        raise AgentError("each tool may be linked once", details={"field": "tools"})
    tools = {t.pk: t for t in Tool.objects.filter(tenant=tenant, pk__in=ids)}
    if set(tools) != set(ids):
        raise ToolNotFound()
    restricted = [link for link in links if link.allowed_functions is not None]
    known: dict[int, set[str]] = {}
    for tool_id, name in ToolFunction.objects.filter(tool_id__in=[link.tool for link in restricted]).values_list(
            "tool_id", "name"):
        known.setdefault(tool_id, set()).add(name)
    for link in restricted:
        names = link.allowed_functions or []
        if not all(isinstance(n, str) and 0 < len(n) <= 128 for n in names):
            raise AgentError("allowed_functions must be function names (or null for all)",
                             details={"field": "tools.allowed_functions", "tool": link.tool})
        _check_function_names(tools[link.tool], sorted(set(names)), known.get(link.tool, set()))
        link.allowed_functions = sorted(set(names))
    return links


def _check_function_names(tool: Tool, names: list[str], known: set[str]) -> None:
    unknown = [n for n in names if n not in known]
    if not unknown:
        return
    accepted = sorted(known)
    details = {"field": "tools.allowed_functions", "tool": tool.pk, "tool_name": tool.name, "unknown": unknown,
               "accepted": accepted}
    if not accepted:
        raise UnknownFunctions(
            f"tool {tool.name!r} has no known functions yet (Test or Refresh it first), so allowed_functions "
            f"cannot name {', '.join(unknown)}; null allows all of them", details=details)
    raise UnknownFunctions(
        f"tool {tool.name!r} offers no function {', '.join(unknown)}; accepted: {', '.join(accepted)}",
        details=details)


def _check_model(tenant: Tenant, model: Any) -> ChatModel | None:
    if model is None:
        return None
    return selectors.chat_model_get(tenant=tenant, model_id=model)


def _check_steps(value: int) -> int:
    lo, hi = MAX_STEPS_RANGE
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise AgentError(f"max_steps must be an integer from {lo} to {hi}", details={"field": "max_steps"})
    return value


def _set_links(agent: Agent, links: list[ToolLink]) -> None:
    AgentTool.objects.filter(agent=agent).delete()
    AgentTool.objects.bulk_create(
        AgentTool(agent=agent, tool_id=link.tool, allowed_functions=link.allowed_functions,
                  requires_approval=link.requires_approval)
        for link in links
    )


def _check_refs(tenant: Tenant, refs: list[str], field: str) -> None:
    """Function refs must name this tenant's known functions, so a misspelt one is refused, not silently unused.

    Whether the agent's links offer them is decided when a turn is routed (links and tools may come and go).
    """
    _, unknown = lookup_refs(tenant=tenant, refs=refs)
    if unknown:
        raise UnknownFunctions(
            f"unknown function(s) {', '.join(unknown)}: {field} takes <tool>__<function> refs of this tenant's tools",
            details={"field": field, "unknown": unknown})


def _apply_routing(agent: Agent, data: AgentInput) -> None:
    """Intent-routing and tool-search settings: refs are checked against the tenant's known functions."""
    if data.tool_search is not None:
        if data.tool_search not in TOOL_SEARCH_CHOICES:
            raise AgentError(f"tool_search {data.tool_search!r} is invalid; accepted: {', '.join(TOOL_SEARCH_CHOICES)}",
                             details={"field": "tool_search"})
        agent.tool_search = data.tool_search
    if data.routing is not None:
        if data.routing not in AgentRouting.values:
            raise AgentError('routing must be "all" or "intent"', details={"field": "routing"})
        agent.routing = data.routing
    if data.routing_threshold is not KEEP:
        value = data.routing_threshold
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1):
            raise AgentError("routing_threshold must be a number from 0 to 1 (or null)",
                             details={"field": "routing_threshold"})
        agent.routing_threshold = value
    if data.knowledge_function is not None:
        ref = data.knowledge_function.strip()
        if ref and ref != agent.knowledge_function:
            _check_refs(agent.tenant, [ref], "knowledge_function")
        agent.knowledge_function = ref
    if data.always_on is not None:
        if not all(isinstance(r, str) and r for r in data.always_on):
            raise AgentError("always_on must be a list of <tool>__<function> refs", details={"field": "always_on"})
        refs = sorted(set(data.always_on))
        # Refs already stored stay (their tool may have gone since): only new ones are checked.
        _check_refs(agent.tenant, [r for r in refs if r not in (agent.always_on or [])], "always_on")
        agent.always_on = refs


@transaction.atomic
def agent_create(*, tenant: Tenant, actor: Any, data: AgentInput) -> Agent:
    """Create an agent with its tool links; a tool or model of another tenant fails it as not found."""
    ensure_role(tenant=tenant, user=actor, at_least=Role.ADMIN)
    links = _check_links(tenant, data.tools or [])
    status = data.status or AgentStatus.ENABLED
    if status not in AgentStatus.values:
        raise AgentError(f"status {status!r} is invalid; accepted: ENABLED, DISABLED", details={"field": "status"})
    agent = Agent(
        tenant=tenant,
        name=_check_name(data.name, "agent"),
        description=data.description or "",
        system_prompt=data.system_prompt or "",
        model=None if data.model is KEEP else _check_model(tenant, data.model),
        max_steps=_check_steps(data.max_steps if data.max_steps is not None else 8),
        status=status,
    )
    _apply_routing(agent, data)
    names.save_unique_name(agent, what="agent")
    _set_links(agent, links)
    return selectors.agent_get(tenant=tenant, agent_id=agent.pk)


@transaction.atomic
def agent_update(*, tenant: Tenant, actor: Any, agent_id: Any, changes: AgentInput) -> Agent:
    """Change fields; `tools`, when given, replaces every link (nothing is written if one is foreign)."""
    ensure_role(tenant=tenant, user=actor, at_least=Role.ADMIN)
    agent = selectors.agent_get(tenant=tenant, agent_id=agent_id, for_update=True)
    links = _check_links(tenant, changes.tools) if changes.tools is not None else None
    if changes.name is not None:
        agent.name = _check_name(changes.name, "agent")
    for attr in ("description", "system_prompt"):
        value = getattr(changes, attr)
        if value is not None:
            setattr(agent, attr, value)
    if changes.model is not KEEP:
        agent.model = _check_model(tenant, changes.model)
    if changes.max_steps is not None:
        agent.max_steps = _check_steps(changes.max_steps)
    if changes.status is not None:
        if changes.status not in AgentStatus.values:
            raise AgentError(f"status {changes.status!r} is invalid; accepted: ENABLED, DISABLED",
                             details={"field": "status"})
        agent.status = changes.status
    _apply_routing(agent, changes)
    names.save_unique_name(agent, what="agent")
    if links is not None:
        _set_links(agent, links)
    return selectors.agent_get(tenant=tenant, agent_id=agent.pk)


@transaction.atomic
def agent_delete(*, tenant: Tenant, actor: Any, agent_id: Any) -> None:
    """Delete an agent with its conversations (audit rows keep their data, unlinked)."""
    ensure_role(tenant=tenant, user=actor, at_least=Role.ADMIN)
    agent = selectors.agent_get(tenant=tenant, agent_id=agent_id, for_update=True)
    agent.delete()
