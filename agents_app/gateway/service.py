"""The gateway's Django side: who is calling, which agent, its functions as MCP tools, and calls through invoke.

Everything here is synchronous ORM work; the ASGI layer runs it in worker threads. The toolset is the one
chat assembles (`build_toolset`) and every call goes through `tool_invoke`, so the rules that hold for chat
(tenant scoping, CHANGED/disabled functions, breaker, argument validation, audit, scrubbing) hold here too.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from rest_framework.authtoken.models import Token

from agents_app import selectors
from agents_app.models import Agent
from agents_app.runtime.toolset import ToolsetFunction
from agents_app.services.approvals import approval_decide
from agents_app.services.chat import build_toolset
from core.errors import NotFound
from core.secrets import redact, scrub_text
from tenants_app.models import ROLE_RANK, Role, Tenant
from tenants_app.selectors import membership_get
from tools_app import selectors as tool_selectors
from tools_app.configs import secret_values
from tools_app.models import Approval, ApprovalStatus, CallStatus, Safety, ToolCall, ToolFunction
from tools_app.runtime import result as codes
from tools_app.runtime.result import ToolResult
from tools_app.services.invoke import audit, check_callable, tool_invoke

VIA = "gateway"
SAFETY_WARNING = "This call is marked DESTRUCTIVE: it may delete or irreversibly change data."


@dataclass(frozen=True)
class Principal:
    """One authenticated request to one agent's endpoint: the user, their role there, the agent."""

    user: Any
    tenant: Tenant
    role: Role
    agent: Agent

    @property
    def may_call(self) -> bool:
        return bool(getattr(self.user, "is_superuser", False)) or ROLE_RANK[self.role] >= ROLE_RANK[Role.MEMBER]

    @property
    def key(self) -> tuple[int, int]:
        return (int(self.user.pk), int(self.agent.pk))


@dataclass(frozen=True)
class GatewayFunction:
    """A toolset function as an MCP tool: the qualified name, schema, description and annotations."""

    name: str
    description: str
    input_schema: dict[str, Any]
    title: str
    read_only: bool
    destructive: bool
    function: ToolsetFunction = field(compare=False)

    def wire(self) -> dict[str, Any]:
        """Everything a client sees; its hash is the toolset fingerprint."""
        return {"name": self.name, "description": self.description, "inputSchema": self.input_schema,
                "title": self.title, "readOnly": self.read_only, "destructive": self.destructive}


@dataclass
class CallOutcome:
    """What tools/call answers: a result, or a pending approval the client must have decided."""

    result: ToolResult
    call_id: int | None = None
    approval_id: int | None = None
    function: GatewayFunction | None = None
    arguments: dict[str, Any] = field(default_factory=dict)


# --- who is calling -------------------------------------------------------------------------------


def user_for_token(key: str) -> Any | None:
    """The active user an API token (`create_token`) belongs to, else None."""
    if not key or len(key) > 128:
        return None
    token = Token.objects.select_related("user").filter(key=key).first()
    if token is None or not token.user.is_active:
        return None
    return token.user


def resolve(*, user: Any, tenant_slug: str, agent_id: str) -> Principal:
    """The caller's membership and the agent; NotFound alike for a foreign tenant, a missing or foreign agent."""
    membership = membership_get(user=user, tenant_slug=tenant_slug)
    tenant = membership.tenant
    agent = selectors.agent_get(tenant=tenant, agent_id=agent_id)
    if not selectors.agent_may_use(tenant=tenant, user=user, agent=agent):
        raise NotFound()  # disabled or not granted: the same answer as a missing agent
    return Principal(user=user, tenant=tenant, role=Role(membership.role), agent=agent)


def refresh(principal: Principal) -> Principal:
    """The same principal with the agent (name, description, status) reloaded; NotFound once it is gone."""
    return resolve(user=principal.user, tenant_slug=principal.tenant.slug, agent_id=str(principal.agent.pk))


# --- the agent's functions ------------------------------------------------------------------------


def list_functions(principal: Principal) -> list[GatewayFunction]:
    """The agent's functions exactly as chat assembles them for this user, with MCP annotations."""
    toolset, _secrets = build_toolset(tenant=principal.tenant, actor=principal.user, agent=principal.agent)
    keys = [(f.tool_id, f.function) for f in toolset]
    titles: dict[tuple[int, str], str] = {}
    if keys:
        rows = ToolFunction.objects.filter(tool__tenant=principal.tenant,
                                           tool_id__in={k[0] for k in keys}).values_list("tool_id", "name",
                                                                                        "annotations")
        for tool_id, name, annotations in rows:
            title = (annotations or {}).get("title") if isinstance(annotations, dict) else None
            if isinstance(title, str) and title:
                titles[(tool_id, name)] = title
    return [
        GatewayFunction(
            name=f.qualified_name,
            description=f.description,
            input_schema=f.parameters,
            title=titles.get((f.tool_id, f.function)) or f"{f.tool_name}: {f.function}",
            read_only=f.safety == Safety.READ_ONLY,
            destructive=f.safety == Safety.DESTRUCTIVE,
            function=f,
        )
        for f in toolset
    ]


def fingerprint(principal: Principal) -> str:
    """A hash of what tools/list shows this user for this agent (and the agent's identity); '' once gone."""
    try:
        current = refresh(principal)
    except NotFound:
        return ""
    listing = [f.wire() for f in list_functions(current)]
    blob = json.dumps([current.agent.name, current.agent.description, listing], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


# --- calls ----------------------------------------------------------------------------------------


def call_function(principal: Principal, name: str, arguments: dict[str, Any]) -> CallOutcome:
    """Call one function by its qualified name, through the same service as `/tools/{id}/invoke/`.

    A call that needs approval runs at once when this user holds an approved, unused approval for the
    very same function and arguments through this agent; otherwise a pending approval is recorded.
    """
    functions = {f.name: f for f in list_functions(principal)}
    fn = functions.get(name)
    if fn is None:
        return CallOutcome(ToolResult.fail(codes.NOT_FOUND, f"unknown tool {name!r}; available: {sorted(functions)}"))
    if not principal.may_call:
        return CallOutcome(ToolResult.fail(
            codes.DISABLED, f"viewers may list this agent's tools but not call them (you are {principal.role.value})"))
    target = fn.function
    if target.needs_approval:
        approved = _claim_approved(principal, fn, arguments)
        if approved is not None:
            return _run_approved(principal, fn, arguments, approved)
        held = _hold(principal, fn, arguments)
        if held is not None:
            return held
    done = tool_invoke(tenant=principal.tenant, actor=principal.user, tool_id=target.tool_id,
                       function=target.function, arguments=arguments, agent=principal.agent, via=VIA)
    outcome = CallOutcome(done.result, call_id=done.call.pk, function=fn, arguments=arguments)
    if done.result.error_code == codes.APPROVAL_REQUIRED:
        outcome.approval_id = _approval_for(principal, done.call, fn)
    return outcome


def _hold(principal: Principal, fn: GatewayFunction, arguments: dict[str, Any]) -> CallOutcome | None:
    """Record a pending approval for a valid call; None when the call is refused anyway (invoke reports why).

    The toolset's rule (which includes the agent link's flag) decides, so the call is held here rather
    than left to the invoke service's tool-level check.
    """
    tool = tool_selectors.tool_get(tenant=principal.tenant, tool_id=fn.function.tool_id)
    try:
        check_callable(tenant=principal.tenant, actor=principal.user, tool=tool, function=fn.function.function,
                       arguments=arguments)
    except Exception as exc:  # invoke's refusal type is private; anything with a result code is a refusal
        if not hasattr(exc, "code"):
            raise
        return None
    secrets = secret_values(tool.type, tool.config)
    refused = ToolResult.fail(codes.APPROVAL_REQUIRED,
                              f"calls to {tool.name}.{fn.function.function} need a person's approval")
    with transaction.atomic():
        call = audit(tenant=principal.tenant, actor=principal.user, tool=tool, function=fn.function.function,
                     arguments=arguments, result=refused, status=CallStatus.AWAITING_APPROVAL, secrets=secrets,
                     agent=principal.agent, via=VIA)
        approval_id = _approval_for(principal, call, fn)
    return CallOutcome(refused, call_id=call.pk, approval_id=approval_id, function=fn, arguments=arguments)


def _approval_for(principal: Principal, call: ToolCall, fn: GatewayFunction) -> int:
    """The Approval row of a held call (created here unless the invoke service already made one)."""
    existing = Approval.objects.filter(tenant=principal.tenant, tool_call=call).values_list("pk", flat=True).first()
    if existing is not None:
        return int(existing)
    approval = Approval.objects.create(
        tenant=principal.tenant, tool_call=call, requested_by=principal.user,
        warning=SAFETY_WARNING if fn.destructive else "",
        expires_at=timezone.now() + timedelta(seconds=settings.TOOLHUB_APPROVAL_TTL_S),
    )
    return int(approval.pk)


def _same_arguments(principal: Principal, fn: GatewayFunction, stored: Any, arguments: dict[str, Any]) -> bool:
    return bool(redacted_arguments(principal, fn, arguments) == stored)


@transaction.atomic
def _claim_approved(principal: Principal, fn: GatewayFunction, arguments: dict[str, Any]) -> ToolCall | None:
    """Take (once) an approved, unexpired, unused request of this user for this function and arguments."""
    now = timezone.now()
    candidates = (
        ToolCall.objects.select_for_update()
        .filter(tenant=principal.tenant, actor=principal.user, agent=principal.agent, via=VIA,
                tool_id=fn.function.tool_id, function=fn.function.function, status=CallStatus.AWAITING_APPROVAL,
                approval__status=ApprovalStatus.APPROVED, approval__expires_at__gt=now)
        .order_by("id")
    )
    for call in candidates:
        if _same_arguments(principal, fn, call.arguments, arguments):
            # Claimed: the status leaves AWAITING_APPROVAL inside this transaction, so it runs once.
            call.status = CallStatus.OK
            call.error = "approved; ran through the MCP gateway"
            call.save(update_fields=["status", "error"])
            return call
    return None


def _run_approved(principal: Principal, fn: GatewayFunction, arguments: dict[str, Any], held: ToolCall) -> CallOutcome:
    done = tool_invoke(tenant=principal.tenant, actor=principal.user, tool_id=fn.function.tool_id,
                       function=fn.function.function, arguments=arguments, agent=principal.agent, via=VIA,
                       approved=True)
    held.status = CallStatus.OK if done.result.success else CallStatus.ERROR
    held.error = f"approved; ran as call {done.call.pk}"
    held.save(update_fields=["status", "error"])
    return CallOutcome(done.result, call_id=done.call.pk, function=fn, arguments=arguments)


def decide_and_run(principal: Principal, outcome: CallOutcome, *, approve: bool) -> CallOutcome:
    """The person at the client answered the elicitation: record the decision, then run once if approved."""
    assert outcome.approval_id is not None and outcome.function is not None
    approval_decide(tenant=principal.tenant, actor=principal.user, approval_id=outcome.approval_id,
                    decision="approve" if approve else "deny")
    if not approve:
        return CallOutcome(ToolResult.fail(codes.APPROVAL_REQUIRED, "the call was declined at the client; not run"),
                           call_id=outcome.call_id, approval_id=outcome.approval_id)
    held = _claim_approved(principal, outcome.function, outcome.arguments)
    if held is None:  # expired between the question and the answer
        return CallOutcome(ToolResult.fail(codes.APPROVAL_REQUIRED, "the approval expired before the call ran"),
                           approval_id=outcome.approval_id)
    return _run_approved(principal, outcome.function, outcome.arguments, held)


def self_approval_allowed(principal: Principal) -> bool:
    """Whether the person at the client may approve their own call (the tenant's second-person rule)."""
    return not bool(getattr(principal.tenant, "approval_requires_second_person", False))


def _secrets(principal: Principal, fn: GatewayFunction) -> list[str]:
    tool = tool_selectors.tool_get(tenant=principal.tenant, tool_id=fn.function.tool_id)
    return secret_values(tool.type, tool.config)


def redacted_arguments(principal: Principal, fn: GatewayFunction, arguments: dict[str, Any]) -> dict[str, Any]:
    redacted: dict[str, Any] = redact(arguments, _secrets(principal, fn))
    return redacted


def scrub(text: str, principal: Principal, fn: GatewayFunction | None) -> str:
    """Mask the function's tool secrets wherever a result echoed them."""
    return text if fn is None else scrub_text(text, _secrets(principal, fn))
