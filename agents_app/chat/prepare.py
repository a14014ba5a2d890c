"""Loading a chat run: short transactions, no outside calls. The conversation is claimed (marked running), the
user's message or the approvals' decisions applied, and the turn's toolset read (agents_app.toolsets)."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from agents_app import selectors
from agents_app.chat.prompt import system_message
from agents_app.chat.state import INTERRUPTED, RunState
from agents_app.errors import (
    AgentDisabled,
    AgentNotUsable,
    ApprovalsPending,
    ConversationBusy,
    ModelNotConfigured,
    NothingToResume,
)
from agents_app.models import Agent, AgentStatus, Conversation, ConversationStatus
from agents_app.runtime.model_client import ModelConfig
from agents_app.runtime.toolset import Toolset
from agents_app.runtime.transcript import close_pending, last_question, pending_calls
from agents_app.toolsets import turn_toolset
from core.errors import NotFound
from tenants_app.models import Tenant
from tools_app.configs import secret_values
from tools_app.models import ApprovalStatus, ExpiryReason, Tool
from tools_app.services.approvals import approval_expire_unbound, approvals_expire

DEMO_MODEL_NAME = "toolhub-demo"
# A run whose process died leaves its conversation "running"; after this long it may be taken over.
STALE_RUN_S = 15 * 60


def model_config(agent: Agent) -> tuple[ModelConfig, bool]:
    """The agent's endpoint (key decrypted), else the demo model; (config, whether to guard its URL)."""
    timeout = float(settings.TOOLHUB_MODEL_TIMEOUT_S)
    if agent.model is not None:
        m = agent.model
        key = m.api_key if isinstance(m.api_key, str) else ""
        return ModelConfig(base_url=m.base_url, model=m.model, api_key=key, params=dict(m.params or {}),
                           timeout_s=timeout), True
    if settings.TOOLHUB_DEMO_MODEL_URL:
        return ModelConfig(base_url=settings.TOOLHUB_DEMO_MODEL_URL, model=DEMO_MODEL_NAME, timeout_s=timeout), False
    raise ModelNotConfigured()


def _usable_agent(*, tenant: Tenant, actor: Any, agent_id: Any) -> Agent:
    agent = selectors.agent_get(tenant=tenant, agent_id=agent_id)
    if agent.status != AgentStatus.ENABLED:
        raise AgentDisabled(f"agent {agent.name!r} is disabled")
    if not selectors.agent_may_use(tenant=tenant, user=actor, agent=agent):
        raise AgentNotUsable(f"you may not chat with agent {agent.name!r} (no use_agent permission)")
    return agent


def _linked_secrets(*, tenant: Tenant, agent: Agent) -> dict[int, list[str]]:
    """Every linked tool's secret values (whether or not this turn offers it), for the run's one scrubber."""
    tool_ids = [link.tool_id for link in agent.agent_tools.all()]
    return {t.pk: secret_values(t.type, t.config) for t in Tool.objects.filter(tenant=tenant, pk__in=tool_ids)}


def _toolset_tools(tenant: Tenant, toolset: Toolset) -> dict[int, Tool]:
    return {t.pk: t for t in Tool.objects.filter(tenant=tenant, pk__in={f.tool_id for f in toolset})}


def _loaded(*, tenant: Tenant, actor: Any, agent: Agent, conversation: Conversation, model: ModelConfig,
            guard: bool, messages: list[dict[str, Any]], persisted: int,
            approvals: dict[str, dict[str, Any]] | None = None, approved_call_ids: frozenset[str] = frozenset(),
            decisions: dict[str, str] | None = None) -> RunState:
    """The run over this turn's toolset (build → route → cap), with the tools whose hooks the run calls: their
    provide_context joins the prompt before each model call."""
    turn = turn_toolset(tenant=tenant, actor=actor, agent=agent, model=model, question=last_question(messages))
    return RunState(tenant=tenant, actor=actor, agent=agent, conversation=conversation, model=model,
                    guard_model_url=guard, toolset=turn.toolset, secrets=_linked_secrets(tenant=tenant, agent=agent),
                    messages=messages, persisted=persisted, preamble=list(turn.events),
                    tools=_toolset_tools(tenant, turn.toolset), approvals=approvals or {},
                    approved_call_ids=approved_call_ids, decisions=decisions or {})


def _claim(conversation: Conversation) -> None:
    if conversation.status == ConversationStatus.RUNNING:
        if conversation.updated_at > timezone.now() - timedelta(seconds=STALE_RUN_S):
            raise ConversationBusy("this conversation is running; wait for it to finish")
        close_pending(conversation.run_state.setdefault("messages", []), INTERRUPTED)


@transaction.atomic
def prepare_chat(*, tenant: Tenant, actor: Any, agent_id: Any, message: str, conversation_id: Any) -> RunState:
    """A new turn: the user's message added to a new or existing conversation, which is claimed for the run."""
    agent = _usable_agent(tenant=tenant, actor=actor, agent_id=agent_id)
    model, guard = model_config(agent)
    if conversation_id is not None:
        conversation = selectors.conversation_get(tenant=tenant, user=actor, conversation_id=conversation_id,
                                                  for_update=True)
        if conversation.agent_id != agent.pk:
            raise NotFound()
        _claim(conversation)
        if conversation.status == ConversationStatus.AWAITING_APPROVAL:
            # A new message abandons the paused calls: their approvals can no longer run anything.
            approvals_expire(tenant=tenant, reason=ExpiryReason.MOVED_ON,
                             approvals=selectors.conversation_approvals(conversation=conversation, pending_only=True))
    else:
        conversation = Conversation.objects.create(tenant=tenant, agent=agent, user=actor, title=message[:200])
    messages: list[dict[str, Any]] = list((conversation.run_state or {}).get("messages") or [])
    if messages and messages[0].get("role") == "system":
        messages[0] = system_message(agent)
    else:
        messages.insert(0, system_message(agent))
    persisted = len(messages)
    messages.append({"role": "user", "content": message})
    run = _loaded(tenant=tenant, actor=actor, agent=agent, conversation=conversation, model=model, guard=guard,
                  messages=messages, persisted=persisted)
    conversation.run_state = {"messages": messages, "approvals": {}}
    conversation.status = ConversationStatus.RUNNING
    conversation.save()
    return run


@transaction.atomic
def expire_due(*, tenant: Tenant, actor: Any, conversation_id: Any) -> None:
    """Expire the conversation's pending approvals that are past due, before a resume reads them."""
    conversation = selectors.conversation_get(tenant=tenant, user=actor, conversation_id=conversation_id)
    pending = selectors.conversation_approvals(conversation=conversation, pending_only=True)
    approvals_expire(tenant=tenant, approvals=pending, due_only=True)


@transaction.atomic
def prepare_resume(*, tenant: Tenant, actor: Any, conversation_id: Any) -> RunState:
    """A paused run again, with its approvals' decisions: approved calls run, denied ones are reported refused,
    expired ones (or ones whose approval no longer fits what would run) are answered in the transcript."""
    conversation = selectors.conversation_get(tenant=tenant, user=actor, conversation_id=conversation_id,
                                              for_update=True)
    _claim(conversation)
    if conversation.status not in (ConversationStatus.AWAITING_APPROVAL, ConversationStatus.AWAITING_AUTHORIZATION):
        raise NothingToResume("this conversation has no paused run to resume")
    agent = _usable_agent(tenant=tenant, actor=actor, agent_id=conversation.agent_id)
    model, guard = model_config(agent)
    state = conversation.run_state or {}
    batches: dict[str, dict[str, Any]] = dict(state.get("approvals") or {})
    rows = {a.pk: a for a in selectors.conversation_approvals(conversation=conversation)}
    undecided = sorted(a.pk for a in rows.values() if a.status == ApprovalStatus.PENDING)
    if undecided:
        raise ApprovalsPending(
            f"approval(s) {', '.join(map(str, undecided))} are still pending: approve or deny them first",
            details={"pending": undecided},
        )
    messages: list[dict[str, Any]] = list(state.get("messages") or [])
    persisted = len(messages)
    decisions, approved = _decisions(tenant=tenant, batches=batches, rows=rows, messages=messages)
    run = _loaded(tenant=tenant, actor=actor, agent=agent, conversation=conversation, model=model, guard=guard,
                  messages=messages, persisted=persisted, approvals=batches, approved_call_ids=frozenset(approved),
                  decisions=decisions)
    conversation.status = ConversationStatus.RUNNING
    conversation.save(update_fields=["status", "updated_at"])
    return run


def _decisions(*, tenant: Tenant, batches: dict[str, dict[str, Any]], rows: dict[int, Any],
               messages: list[dict[str, Any]]) -> tuple[dict[str, str], set[str]]:
    """Each batch's decision (approved / denied) and the call ids that may run; an expired batch (or one whose
    approval no longer fits what would run) is answered in the transcript instead."""
    decisions: dict[str, str] = {}
    approved: set[str] = set()
    open_by_id = {p.call_id: p for p in pending_calls(messages)}
    for key, batch in batches.items():
        row = rows.get(int(batch["id"]))
        status = row.status if row is not None else ApprovalStatus.EXPIRED
        why = ""
        if row is not None and status == ApprovalStatus.APPROVED:
            # What was approved must still be what runs: the tool's config, the arguments, the user's right.
            why = approval_expire_unbound(tenant=tenant, approval=row,
                                          arguments=_batch_arguments(batch, open_by_id)) or ""
            status = ApprovalStatus.EXPIRED if why else status
        if status == ApprovalStatus.APPROVED:
            decisions[key] = "approved"
            approved.update(batch["call_ids"])
        elif status == ApprovalStatus.DENIED:
            decisions[key] = "denied"
        else:  # expired: never run, and say so in the transcript
            messages.extend({"role": "tool", "tool_call_id": call_id,
                             "content": "Error: not executed: the approval expired" + (f" ({why})" if why else "")}
                            for call_id in batch["call_ids"] if call_id in open_by_id)
    return decisions, approved


def _batch_arguments(batch: dict[str, Any], open_by_id: dict[str, Any]) -> dict[str, Any] | None:
    """The arguments the batch's calls would run with (identical within a batch), from the transcript."""
    for call_id in batch.get("call_ids") or []:
        call = open_by_id.get(call_id)
        if call is None:
            continue
        try:
            arguments = json.loads(call.arguments or "{}")
        except ValueError:
            return None  # the loop answers a call whose arguments are not JSON with an error; nothing to compare
        return arguments if isinstance(arguments, dict) else None
    return None
