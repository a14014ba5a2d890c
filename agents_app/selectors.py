"""Agent, model, conversation and approval reads: the tenant comes first, always."""

from __future__ import annotations

from typing import Any, cast

from django.contrib.contenttypes.models import ContentType
from django.db.models import Prefetch, Q, QuerySet
from guardian.models import UserObjectPermission
from guardian.shortcuts import get_objects_for_user

from agents_app.errors import AgentNotFound
from agents_app.models import Agent, AgentStatus, AgentTool, ChatModel, Conversation, Message
from agents_app.runtime.toolset import FunctionCandidate, FunctionState
from core.errors import NotFound
from core.ids import as_id
from tenants_app.models import Tenant
from tenants_app.policies import VIEWERS
from tenants_app.selectors import is_tenant_admin
from tools_app.models import Approval, ApprovalStatus, ToolFunction, function_safety, with_parameter_overrides


def _int(value: Any) -> int:
    pk = as_id(value)
    if pk is None:
        raise NotFound()
    return pk


# --- chat models ----------------------------------------------------------------------------------


def chat_model_list(*, tenant: Tenant) -> QuerySet[ChatModel]:
    return ChatModel.objects.filter(tenant=tenant).order_by("name", "id")


def chat_model_get(*, tenant: Tenant, model_id: Any, for_update: bool = False) -> ChatModel:
    qs = ChatModel.objects.filter(tenant=tenant)
    if for_update:
        qs = qs.select_for_update()
    try:
        return qs.get(pk=_int(model_id))
    except ChatModel.DoesNotExist:
        raise NotFound() from None


# --- agents ---------------------------------------------------------------------------------------


def _with_links(qs: QuerySet[Agent]) -> QuerySet[Agent]:
    links = AgentTool.objects.select_related("tool").order_by("tool__name", "id")
    return qs.select_related("model").prefetch_related(Prefetch("agent_tools", queryset=links))


def agent_list(*, tenant: Tenant, user: Any) -> QuerySet[Agent]:
    """Admins see every agent; others the enabled ones they may use."""
    qs: QuerySet[Agent]
    if is_tenant_admin(tenant=tenant, user=user):
        qs = Agent.objects.filter(tenant=tenant)
    else:
        qs = usable_agents(tenant=tenant, user=user)
    return _with_links(qs).order_by("name", "id")


def agent_get(*, tenant: Tenant, agent_id: Any, for_update: bool = False) -> Agent:
    qs: QuerySet[Agent] = Agent.objects.filter(tenant=tenant)
    qs = qs.select_for_update(of=("self",)) if for_update else _with_links(qs)
    try:
        return qs.get(pk=_int(agent_id))
    except Agent.DoesNotExist:
        raise AgentNotFound() from None


def usable_agents(*, tenant: Tenant, user: Any) -> QuerySet[Agent]:
    """Enabled agents this user may chat with: admins all; others all unless narrowed by `use_agent` grants.

    An agent on which any user holds an explicit `use_agent` grant is restricted to its grantees
    (the same semantics as tools_app.policies.USE_TOOL).
    """
    qs = Agent.objects.filter(tenant=tenant, status=AgentStatus.ENABLED)
    if is_tenant_admin(tenant=tenant, user=user):
        return qs
    if not VIEWERS.allows(tenant=tenant, user=user):
        return qs.none()
    granted = get_objects_for_user(user, "agents_app.use_agent", klass=qs, accept_global_perms=False)
    pks = UserObjectPermission.objects.filter(
        permission__codename="use_agent", content_type=ContentType.objects.get_for_model(Agent)
    ).values_list("object_pk", flat=True)
    restricted = Agent.objects.filter(tenant=tenant, pk__in={int(pk) for pk in pks}).values_list("pk", flat=True)
    return qs.exclude(pk__in=list(restricted)) | granted


def agent_may_use(*, tenant: Tenant, user: Any, agent: Agent) -> bool:
    return usable_agents(tenant=tenant, user=user).filter(pk=agent.pk).exists()


def function_candidates(*, tenant: Tenant, tool_ids: list[int]) -> list[FunctionCandidate]:
    """Every function of the given tools of this tenant, as the Django-free toolset assembly takes them.

    Plain values, not Tool instances: loading a Tool decrypts its config, which assembly never needs.
    """
    rows = ToolFunction.objects.filter(tool__tenant=tenant, tool_id__in=tool_ids).values_list(
        "tool_id", "tool__name", "tool__type", "tool__status", "tool__disabled_until", "name", "description",
        "input_schema", "state", "enabled", "tool__safety", "tool__requires_approval", "requires_approval",
        "tool__tenant_id", "annotations", "safety_override", "unsupported_reason", "description_override",
        "parameter_overrides",
    )
    return [
        FunctionCandidate(
            tool_id=r[0], tool_name=r[1], tool_type=r[2], tool_status=r[3], tool_disabled_until=r[4], function=r[5],
            # The tenant's override is what the model reads; the upstream's stays for drift and the screen.
            description=r[17] or r[6], input_schema=with_parameter_overrides(r[7] or {}, r[18]), state=cast(FunctionState, r[8]), enabled=r[9],
            # The function's own safety: the admin's override, else its MCP annotations, else the tool's.
            safety=function_safety(tool_safety=r[10], override=r[15], annotations=r[14]),  # type: ignore[arg-type]
            tool_requires_approval=r[11], function_requires_approval=r[12], tenant_id=r[13],
            # An admin's safety override replaces what the server's annotations say.
            annotations=r[14] if isinstance(r[14], dict) and not r[15] else None,
            unsupported_reason=r[16] or "",
        )
        for r in rows
    ]


# --- conversations and approvals ------------------------------------------------------------------


def conversation_list(*, tenant: Tenant, user: Any) -> QuerySet[Conversation]:
    return Conversation.objects.filter(tenant=tenant, user=user).select_related("agent").order_by("-updated_at", "-id")


def conversation_get(*, tenant: Tenant, user: Any, conversation_id: Any, for_update: bool = False,
                     admins_too: bool = False) -> Conversation:
    """The user's own conversation (tenant admins may read any with `admins_too`); foreign ones are missing."""
    qs = Conversation.objects.filter(tenant=tenant).select_related("agent", "user")
    if not (admins_too and is_tenant_admin(tenant=tenant, user=user)):
        qs = qs.filter(user=user)
    if for_update:
        qs = qs.select_for_update(of=("self",))
    try:
        return qs.get(pk=_int(conversation_id))
    except Conversation.DoesNotExist:
        raise NotFound() from None


def conversation_messages(*, conversation: Conversation) -> QuerySet[Message]:
    return conversation.messages.order_by("id")


def conversation_approvals_all(*, conversation: Conversation) -> QuerySet[Approval]:
    """Every approval the conversation's runs asked for, decided or not (a reopened transcript shows them all)."""
    current = [int(batch["id"]) for batch in ((conversation.run_state or {}).get("approvals") or {}).values()]
    return (Approval.objects.filter(tenant=conversation.tenant)
            .filter(Q(tool_call__conversation=conversation) | Q(pk__in=current))
            .select_related("tool_call", "tool_call__tool", "requested_by", "decided_by").order_by("id"))


def conversation_approvals(*, conversation: Conversation, pending_only: bool = False) -> QuerySet[Approval]:
    batches = (conversation.run_state or {}).get("approvals") or {}
    ids = [int(batch["id"]) for batch in batches.values()]
    qs = Approval.objects.filter(tenant=conversation.tenant, pk__in=ids).select_related("tool_call")
    if pending_only:
        qs = qs.filter(status=ApprovalStatus.PENDING)
    return qs.order_by("id")
