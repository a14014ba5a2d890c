"""Chat runs: assemble the toolset in-process, run the agent loop outside any transaction, audit and persist.

A run is a generator of (event, data) tuples. Its state is the OpenAI-format transcript kept in
`Conversation.run_state["messages"]` plus the map of approval keys to Approval rows; closing the
generator early (a client that hangs up) still persists a consistent transcript.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import connections, transaction
from django.utils import timezone

from agents_app import selectors
from agents_app.errors import (
    AgentDisabled,
    AgentNotUsable,
    ApprovalsPending,
    ConversationBusy,
    ModelNotConfigured,
    NothingToResume,
)
from agents_app.models import Agent, AgentStatus, Conversation, ConversationStatus, Message
from agents_app.runtime import loop
from agents_app.runtime.loop import Event, pending_calls, render_result
from agents_app.runtime.model_client import ModelConfig
from agents_app.runtime.toolset import AgentLink, Toolset, assemble
from agents_app.services.chat_client_requests import client_requests_for
from core.codes import ApiCode, ResultCode
from core.db import release_connection
from core.errors import NotFound
from core.links import public_base
from core.secrets import Scrubber, StreamScrubber, redact, scrubber
from tenants_app.models import Tenant
from tools_app import selectors as tool_selectors
from tools_app.configs import secret_values
from tools_app.models import ApprovalStatus, ApprovalVia, ExpiryReason, Tool
from tools_app.policies import USE_TOOL
from tools_app.runtime.errors import OutboundBlocked
from tools_app.runtime.result import ToolResult
from tools_app.services import oauth, plugins
from tools_app.services.approvals import (
    approval_expire_unbound,
    approval_record_result,
    approval_request,
    approval_screen,
    approvals_expire,
)
from tools_app.services.invoke import REFUSED_CODES, call_refused, tool_invoke
from tools_app.wiring.http import guarded_http_client, outbound_policy

DEMO_MODEL_NAME = "toolhub-demo"
DEFAULT_SYSTEM_PROMPT = "You are {name}, an assistant on Toolhub. Use the offered tools when they help."
# A run whose process died leaves its conversation "running"; after this long it may be taken over.
STALE_RUN_S = 15 * 60
INTERRUPTED = "the run was interrupted before this call finished"


@dataclass
class _Run:
    """Everything one run needs, loaded inside a short transaction before any model or tool call."""

    tenant: Tenant
    actor: Any
    agent: Agent
    conversation: Conversation
    model: ModelConfig
    guard_model_url: bool
    toolset: Toolset
    secrets: dict[int, list[str]]
    messages: list[dict[str, Any]]
    persisted: int  # messages[:persisted] already have Message rows (or are the system prompt)
    approvals: dict[str, dict[str, Any]] = field(default_factory=dict)  # key -> {"id", "call_ids"}
    approved_call_ids: frozenset[str] = frozenset()
    decisions: dict[str, str] = field(default_factory=dict)
    results: dict[str, ToolResult] = field(default_factory=dict)
    preamble: list[Event] = field(default_factory=list)  # e.g. intent.routed, sent before the loop's events
    tools: dict[int, Tool] = field(default_factory=dict)  # the toolset's tools, for their plugin hooks
    titles: dict[str, str] = field(default_factory=dict)  # call id -> how the call is named (call_title)
    arguments: dict[str, Any] = field(default_factory=dict)  # call id -> the arguments the model sent
    # The events reach a person while the run goes on (a streamed chat): only then can a server's question
    # (MCP elicitation) or sampling request be put to the user mid-call.
    interactive: bool = False
    # Toolhub's public origin for links handed out during the run (an OAuth tool's connect link).
    base_url: str = ""

    @property
    def scrub(self) -> Scrubber:
        """The chat's one scrubber: the model's key and every linked tool's secrets, for all that is shown or kept."""
        return scrubber([self.model.api_key, *(v for values in self.secrets.values() for v in values)])


class ChatRun:
    """An iterator of events; `close()` (also on a client disconnect) persists what happened."""

    def __init__(self, run: _Run) -> None:
        self.conversation_id: int = run.conversation.pk
        self._run = run
        self._entered = False
        self._finished = False
        self._events: Generator[Event, None, None] = self._generate()

    def __iter__(self) -> ChatRun:
        return self

    @property
    def interactive(self) -> bool:
        return self._run.interactive

    @interactive.setter
    def interactive(self, value: bool) -> None:
        """Set by the view for a streamed response: a person sees the events as they come and can answer."""
        self._run.interactive = value

    def __next__(self) -> Event:
        return next(self._events)

    def close(self) -> None:
        self._events.close()
        if not self._entered and not self._finished:
            self._finish(None)  # never started: release the conversation

    def _generate(self) -> Generator[Event, None, None]:
        self._entered = True
        run = self._run
        outcome: Event | None = None
        events: Iterator[Event] | None = None
        try:
            blocked = _model_blocked(run)
            if blocked is not None:
                outcome = "error", {"code": ApiCode.MODEL_BLOCKED, "message": blocked, "steps": 0,
                                    "conversation_id": self.conversation_id}
                yield outcome
                return
            yield from run.preamble
            events = loop.run(
                model=run.model,
                messages=run.messages,
                toolset=run.toolset,
                execute=_executor(run),
                max_steps=run.agent.max_steps,
                result_char_cap=settings.TOOLHUB_TOOL_RESULT_CHARS,
                decisions=run.decisions,
                # A tenant's endpoint goes through the outbound guard on every request; the demo model doesn't.
                http_client=guarded_http_client() if run.guard_model_url else None,
                screen=_screen(run),
                system=_system(run),
                guard_after_flagged=run.tenant.approve_after_flagged_result,
            )
            scrub = run.scrub
            # A model may echo its key (or a tool secret) split across deltas: hold back what may start one.
            text = StreamScrubber(scrub)
            for name, data in _without_connection(events):
                if name == "message.delta":
                    shown = text.feed(str(data.get("text") or ""))
                    if shown:
                        yield name, {**data, "text": shown}
                    continue
                rest = text.flush()
                if rest:
                    yield "message.delta", {"text": rest}
                data = _shaped(run, name, scrub.value(data))
                if name in ("done", "error"):
                    data = {**data, "conversation_id": self.conversation_id}
                    outcome = name, data
                yield name, data
                if name == "tool.result" and data.get("error_code") in WAITING_EVENTS:
                    needed = _connection_required(run, data)
                    if needed is not None:
                        yield WAITING_EVENTS[str(data["error_code"])], needed
        finally:
            if events is not None:
                events.close()  # type: ignore[attr-defined]  # loop.run is a generator
            self._finish(outcome)

    def _finish(self, outcome: Event | None) -> None:
        if self._finished:
            return
        self._finished = True
        _persist(self._run, outcome)


def _shaped(run: _Run, name: str, data: dict[str, Any]) -> dict[str, Any]:
    """One loop event as the chat's client sees it (already scrubbed): titled, arguments redacted, an approval
    request stored, paused calls described; a refused call audited."""
    if name in ("tool.call", "tool.result", "tool.progress"):
        data = {**data, "title": _title(run, data)}
    if name == "tool.call":
        run.arguments[str(data.get("call_id"))] = data.get("arguments")
        return _redacted_call(run, data)
    if name == "tool.result":
        _audit_refused(run, data)
    elif name == "approval.required":
        return _request_approval(run, data)
    elif name == "done" and data.get("status") == "paused":
        return {**data, "pending": [_pending_out(run, p) for p in data.get("pending", [])]}
    return data


def _without_connection(events: Iterator[Event]) -> Iterator[Event]:
    """The loop's events, this thread's database connection given back before each is awaited: the loop waits
    on the model's answer and on tool calls (run by worker threads, each with a connection of its own while it
    needs one), and what the caller does with an event takes a connection again only when it queries."""
    while True:
        release_connection()
        try:
            item = next(events)
        except StopIteration:
            return
        yield item


# --- entry points ---------------------------------------------------------------------------------


def chat_start(*, tenant: Tenant, actor: Any, agent_id: Any, message: str, conversation_id: Any = None,
               base_url: str = "") -> ChatRun:
    """Add the user's message to a new or existing conversation and return the run's event stream. `base_url`:
    Toolhub's public origin for links the run hands out (default TOOLHUB_PUBLIC_URL)."""
    run = _prepare_chat(tenant=tenant, actor=actor, agent_id=agent_id, message=message,
                        conversation_id=conversation_id)
    run.base_url = base_url or public_base()
    return ChatRun(run)


def conversation_resume(*, tenant: Tenant, actor: Any, conversation_id: Any, base_url: str = "") -> ChatRun:
    """Continue a paused run with the decisions of its Approval rows (denied calls are reported refused)."""
    _expire_due(tenant=tenant, actor=actor, conversation_id=conversation_id)
    run = _prepare_resume(tenant=tenant, actor=actor, conversation_id=conversation_id)
    run.base_url = base_url or public_base()
    return ChatRun(run)


# --- preparation (short transactions, no outside calls) -------------------------------------------


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


def build_toolset(*, tenant: Tenant, actor: Any, agent: Agent) -> tuple[Toolset, dict[int, list[str]]]:
    """The agent's linked functions this user may use, with approval flags from the tools' own policy."""
    links = list(agent.agent_tools.all())
    tool_ids = [link.tool_id for link in links]
    tools = {t.pk: t for t in Tool.objects.filter(tenant=tenant, pk__in=tool_ids)}
    usable = set(USE_TOOL.tools(tenant=tenant, user=actor).filter(pk__in=tool_ids).values_list("pk", flat=True))
    candidates = selectors.function_candidates(tenant=tenant, tool_ids=tool_ids)
    # Each function's needs_approval comes from tools_app's one approval rule, applied inside assembly.
    toolset = assemble(
        tenant_id=tenant.pk,
        candidates=candidates,
        links=[AgentLink(link.tool_id, None if link.allowed_functions is None else frozenset(link.allowed_functions),
                         link.requires_approval) for link in links],
        usable_tool_ids=usable,
        now=timezone.now(),
    )
    secrets = {t.pk: secret_values(t.type, t.config) for t in tools.values()}
    return toolset, secrets


def _routed(*, tenant: Tenant, actor: Any, agent: Agent, toolset: Toolset, messages: list[dict[str, Any]],
            model: ModelConfig) -> tuple[Toolset, list[Event]]:
    """With intent routing, the turn's toolset narrowed to the matched intents (agents_app.intents.routing)."""
    from agents_app.intents.routing import route_turn

    question = next((_text(m.get("content")) for m in reversed(messages) if m.get("role") == "user"), "")
    narrowed, event = route_turn(tenant=tenant, actor=actor, agent=agent, toolset=toolset, question=question,
                                 limit=_model_limit(model))
    return narrowed, [("intent.routed", event)] if event is not None else []



def _model_limit(model: ModelConfig) -> int:
    """The functions one request may offer: the model's `max_tools` when it sets a whole number, else the
    deployment's TOOLHUB_MODEL_TOOL_LIMIT (128 unless set). The one place the limit is decided; intent routing
    caps its fallback with it too."""
    default = int(settings.TOOLHUB_MODEL_TOOL_LIMIT)
    try:
        limit = int(model.params.get("max_tools", default))
    except (TypeError, ValueError):
        return default
    return limit if limit > 0 else default


def _capped(toolset: Toolset, model: ModelConfig, preamble: list[Event]) -> tuple[Toolset, list[Event]]:
    """The toolset within the model's limit (`_model_limit`), after any routing chose; what was
    left out, and why (over the limit, or a function Toolhub cannot call), is said in `toolset.limited`."""
    limit = _model_limit(model)
    toolset = toolset.capped(limit)
    if toolset.left_out:
        preamble = [*preamble, ("toolset.limited", {"offered": len(toolset), "limit": limit,
                                                    "left_out": list(toolset.left_out)})]
    return toolset, preamble


def _system_message(agent: Agent, context: str = "") -> dict[str, Any]:
    """The agent's prompt, then what its tools add for this user (their provide_context hooks)."""
    prompt = agent.system_prompt or DEFAULT_SYSTEM_PROMPT.format(name=agent.name)
    return {"role": "system", "content": f"{prompt}\n\n{context}" if context else prompt}


def _toolset_tools(tenant: Tenant, toolset: Toolset) -> dict[int, Tool]:
    return {t.pk: t for t in Tool.objects.filter(tenant=tenant, pk__in={f.tool_id for f in toolset})}


def _claim(conversation: Conversation) -> None:
    if conversation.status == ConversationStatus.RUNNING:
        if conversation.updated_at > timezone.now() - timedelta(seconds=STALE_RUN_S):
            raise ConversationBusy("this conversation is running; wait for it to finish")
        loop.close_pending(conversation.run_state.setdefault("messages", []), INTERRUPTED)


@transaction.atomic
def _prepare_chat(*, tenant: Tenant, actor: Any, agent_id: Any, message: str, conversation_id: Any) -> _Run:
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
        messages[0] = _system_message(agent)
    else:
        messages.insert(0, _system_message(agent))
    persisted = len(messages)
    messages.append({"role": "user", "content": message})
    toolset, secrets = build_toolset(tenant=tenant, actor=actor, agent=agent)
    toolset, preamble = _routed(tenant=tenant, actor=actor, agent=agent, toolset=toolset, messages=messages,
                                model=model)
    toolset, preamble = _capped(toolset, model, preamble)
    tools = _toolset_tools(tenant, toolset)  # their provide_context joins the prompt before each model call
    conversation.run_state = {"messages": messages, "approvals": {}}
    conversation.status = ConversationStatus.RUNNING
    conversation.save()
    return _Run(tenant=tenant, actor=actor, agent=agent, conversation=conversation, model=model, guard_model_url=guard,
                toolset=toolset, secrets=secrets, messages=messages, persisted=persisted, preamble=preamble,
                tools=tools)


@transaction.atomic
def _expire_due(*, tenant: Tenant, actor: Any, conversation_id: Any) -> None:
    conversation = selectors.conversation_get(tenant=tenant, user=actor, conversation_id=conversation_id)
    pending = selectors.conversation_approvals(conversation=conversation, pending_only=True)
    approvals_expire(tenant=tenant, approvals=pending, due_only=True)


@transaction.atomic
def _prepare_resume(*, tenant: Tenant, actor: Any, conversation_id: Any) -> _Run:
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
            for call_id in batch["call_ids"]:
                if call_id in open_by_id:
                    messages.append({"role": "tool", "tool_call_id": call_id,
                                     "content": "Error: not executed: the approval expired" + (f" ({why})" if why else "")})
    toolset, secrets = build_toolset(tenant=tenant, actor=actor, agent=agent)
    toolset, preamble = _routed(tenant=tenant, actor=actor, agent=agent, toolset=toolset, messages=messages,
                                model=model)
    toolset, preamble = _capped(toolset, model, preamble)
    tools = _toolset_tools(tenant, toolset)
    conversation.status = ConversationStatus.RUNNING
    conversation.save(update_fields=["status", "updated_at"])
    return _Run(tenant=tenant, actor=actor, agent=agent, conversation=conversation, model=model, guard_model_url=guard,
                toolset=toolset, secrets=secrets, messages=messages, persisted=persisted, approvals=batches,
                approved_call_ids=frozenset(approved), decisions=decisions, preamble=preamble, tools=tools)


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


# --- during the run -------------------------------------------------------------------------------


def _model_blocked(run: _Run) -> str | None:
    if not run.guard_model_url:
        return None
    try:
        from core.outbound import check_url

        check_url(run.model.base_url, outbound_policy())
    except OutboundBlocked as exc:
        return f"the model endpoint is not reachable from Toolhub: {exc.message}"
    except OSError:
        return None  # resolution failures surface as model_unreachable from the client
    return None


def _executor(run: _Run) -> loop.Execute:
    owner = threading.get_ident()

    def execute(fn: Any, arguments: dict[str, Any], call_id: str) -> ToolResult:
        try:
            done = tool_invoke(
                tenant=run.tenant,
                actor=run.actor,
                tool_id=fn.tool_id,
                function=fn.function,
                arguments=arguments,
                # Only calls the loop held for a person and a person approved; never from model or tool text.
                approved=call_id in run.approved_call_ids,
                agent=run.agent,
                conversation=run.conversation,
                on_progress=loop.progress_reporter(),
                via=ApprovalVia.CHAT,
                client_requests=client_requests_for(run, fn, loop.event_reporter()),
            )
            result = done.result  # scrubbed of the tool's secrets by tool_invoke, the model's key too
            run.results[call_id] = result.scrubbed(run.scrub)
            if call_id in run.approved_call_ids and result.error_code not in loop.WAIT_CODES:
                approval_id = next((b["id"] for b in run.approvals.values() if call_id in b["call_ids"]), None)
                if approval_id is not None:  # the approval's page links the call it let through
                    approval_record_result(tenant=run.tenant, approval_id=approval_id, call=done.call)
            return result
        finally:
            if threading.get_ident() != owner:
                connections.close_all()  # the loop's worker threads must not leak connections

    return execute


def _screen(run: _Run) -> loop.Screen:
    """Before the loop holds a guarded call: the tool's refusal, or its approval card's text."""

    def screen(fn: Any, arguments: dict[str, Any]) -> tuple[str | None, str]:
        tool = run.tools.get(fn.tool_id)
        if tool is None:
            return None, ""
        reason = plugins.refusal(tenant=run.tenant, actor=run.actor, tool=tool)
        if reason:
            return run.scrub.text(reason), ""
        card = approval_screen(tenant=run.tenant, actor=run.actor, tool=tool, function=fn.function,
                               arguments=arguments)
        return (run.scrub.text(card.refuse) if card.refuse else None), run.scrub.text(card.text)

    return screen


def _system(run: _Run) -> Callable[[], str] | None:
    """The system message before each model call: the agent's prompt, then what its tools add now."""
    specs = [plugins.spec_for(t) for t in run.tools.values()]
    if not any(spec is not None and "provide_context" in spec.hooks for spec in specs):
        return None

    def system() -> str:
        context = plugins.provided_context(tenant=run.tenant, actor=run.actor, tools=run.tools.values())
        release_connection()  # the model is called next: its answer is not waited for holding a connection
        return str(run.scrub.text(_system_message(run.agent, context)["content"]))

    return system


def _title(run: _Run, data: dict[str, Any]) -> str:
    """How a call is named for people (the tool's call_title hook), worked out once per call."""
    call_id = str(data.get("call_id") or "")
    if call_id in run.titles:
        return run.titles[call_id]
    fn = run.toolset.get(str(data.get("name") or ""))
    tool = run.tools.get(fn.tool_id) if fn is not None else None
    arguments = data.get("arguments")
    if tool is None or fn is None:
        title = str(data.get("name") or "")
    else:
        title = run.scrub.text(plugins.call_title(tool, fn.function, arguments if isinstance(arguments, dict) else {}))
    if call_id:
        run.titles[call_id] = title
    return title


def _audit_refused(run: _Run, data: dict[str, Any]) -> None:
    """A call refused inside the loop (bad arguments, the tool's own refusal) never reached tool_invoke:
    audit it here, so the admin's "Refused calls" shows what the model got wrong."""
    if data.get("error_code") not in REFUSED_CODES or str(data.get("call_id")) in run.results:
        return
    fn = run.toolset.get(str(data.get("name") or ""))
    if fn is None:
        return
    arguments = run.arguments.get(str(data.get("call_id")), {})
    call_refused(tenant=run.tenant, actor=run.actor, tool_id=fn.tool_id, function=fn.function,
                 arguments=arguments, code=str(data["error_code"]), message=str(data.get("error") or ""),
                 agent=run.agent, conversation=run.conversation, via=ApprovalVia.CHAT)


# A call that waits for its user: the event telling them what to do (the run pauses; resume runs it again).
WAITING_EVENTS: dict[str, str] = {ResultCode.AUTHORIZATION_REQUIRED: "authorization.required",
                  ResultCode.CREDENTIALS_REQUIRED: "credentials.required"}


def _connection_required(run: _Run, data: dict[str, Any]) -> dict[str, Any] | None:
    """What the person in the chat does before the paused call can run: connect the OAuth tool (their own link,
    when they may connect it) or set their keys (named, on their connections page); then resume the run."""
    fn = run.toolset.get(str(data.get("name") or ""))
    if fn is None:
        return None
    base = (run.base_url or "").rstrip("/")
    event: dict[str, Any] = {"call_id": data.get("call_id"), "tool": fn.tool_name, "function": fn.function,
                             "resume_url": f"{base}/api/v1/conversations/{run.conversation.pk}/resume/"}
    if data.get("error_code") == ResultCode.CREDENTIALS_REQUIRED:
        tool = Tool.objects.filter(tenant=run.tenant, pk=fn.tool_id).first()
        state = tool_selectors.user_credentials_state(tool=tool, user=run.actor) if tool is not None else None
        release_connection()
        return {**event, "missing": (state or {}).get("missing", []),
                "connections_url": f"{base}/accounts/connections/?tenant={run.tenant.slug}"}
    link = oauth.authorize_link_or_none(tenant=run.tenant, actor=run.actor, tool_id=fn.tool_id,
                                        base_url=run.base_url) if run.base_url else None
    release_connection()
    return {**event, "authorize_url": link}


def _secrets_of(run: _Run, data: dict[str, Any]) -> list[str]:
    fn = run.toolset.get(str(data.get("name") or ""))
    return run.secrets.get(fn.tool_id, []) if fn is not None else []


def _redacted_call(run: _Run, data: dict[str, Any]) -> dict[str, Any]:
    arguments = data.get("arguments")
    if isinstance(arguments, dict):
        return {**data, "arguments": redact(arguments, _secrets_of(run, data))}
    return data


def _request_approval(run: _Run, data: dict[str, Any]) -> dict[str, Any]:
    """Record the held batch as an awaiting ToolCall plus an Approval; the event carries its id."""
    fn = run.toolset.get(data["name"])
    assert fn is not None
    call_ids = list(data.get("call_ids") or [])
    title = _title(run, {"call_id": call_ids[0] if call_ids else "", "name": data["name"],
                         "arguments": data.get("arguments")})
    approval = approval_request(
        tenant=run.tenant, actor=run.actor, tool=fn.tool_id, function=fn.function, arguments=data["arguments"],
        agent=run.agent, conversation=run.conversation, via=ApprovalVia.CHAT, count=int(data.get("count") or 1),
        summary=str(data.get("summary") or ""), title=title,
    )
    run.approvals[data["key"]] = {"id": approval.pk, "call_ids": list(data.get("call_ids") or [])}
    return _pending_out(run, data)


def _pending_out(run: _Run, data: dict[str, Any]) -> dict[str, Any]:
    fn = run.toolset.get(str(data.get("name") or ""))
    secrets = run.secrets.get(fn.tool_id, []) if fn is not None else []
    batch = run.approvals.get(str(data.get("key")), {})
    return {
        "approval_id": batch.get("id"),
        "tool": data.get("tool"),
        "function": data.get("function"),
        "name": data.get("name"),
        "arguments": redact(data.get("arguments") or {}, secrets),
        "safety": data.get("safety"),
        "warning": data.get("warning"),
        "summary": data.get("summary"),
        "title": next((run.titles[c] for c in data.get("call_ids") or [] if c in run.titles), data.get("name")),
        "count": data.get("count"),
        "call_ids": data.get("call_ids"),
    }


# --- after the run --------------------------------------------------------------------------------


def _persist(run: _Run, outcome: Event | None) -> None:
    """Make the transcript valid and store it, whether the run ended, paused or was cut off."""
    messages = run.messages
    scrub = run.scrub
    held = {cid for batch in run.approvals.values() for cid in batch["call_ids"]}
    paused = outcome is not None and outcome[0] == "done" and outcome[1].get("status") == "paused"
    waiting = {str(w.get("call_id")) for w in (outcome[1].get("waiting") or [])} if paused and outcome else set()
    awaiting = connecting = False
    for call in pending_calls(messages):
        if call.call_id in waiting:
            # Runs again on resume, once its user has connected or set their keys; a call approved before it
            # waited keeps its approval (the batch stays live below) and is not asked for again.
            connecting = True
            continue
        if call.call_id in held and (paused or outcome is None):
            awaiting = True
            continue
        done = run.results.get(call.call_id)
        content = render_result(done, settings.TOOLHUB_TOOL_RESULT_CHARS) if done else f"Error: not executed: {INTERRUPTED}"
        messages.append({"role": "tool", "tool_call_id": call.call_id, "content": content})
    rows = [
        Message(
            conversation=run.conversation,
            role=str(m.get("role") or ""),
            content=scrub.text(_text(m.get("content"))),
            tool_calls=scrub.value(m.get("tool_calls")),
            tool_call_id=str(m.get("tool_call_id") or ""),
        )
        for m in messages[run.persisted:]
        if m.get("role") != "system"
    ]
    with transaction.atomic():
        conversation = Conversation.objects.select_for_update().get(pk=run.conversation.pk)
        Message.objects.bulk_create(rows)
        still_open = {p.call_id for p in pending_calls(messages)}
        live = {k: v for k, v in run.approvals.items() if any(c in still_open for c in v["call_ids"])}
        # What the model said is stored scrubbed: an echoed key never reaches the database or a reader.
        conversation.run_state = {"messages": scrub.value(messages), "approvals": live}
        conversation.status = (ConversationStatus.AWAITING_APPROVAL if awaiting else
                               ConversationStatus.AWAITING_AUTHORIZATION if connecting else ConversationStatus.IDLE)
        conversation.save(update_fields=["run_state", "status", "updated_at"])
    run.persisted = len(messages)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""
