"""The gateway's Django side: who is calling, which agent, its functions as MCP tools, and calls through invoke.

Everything here is synchronous ORM work; the ASGI layer runs it in worker threads. The toolset is the one
chat assembles (`build_toolset`) and every call goes through `tool_invoke`, so the rules that hold for chat
(tenant scoping, CHANGED/disabled functions, breaker, argument validation, audit, scrubbing) hold here too.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any
from urllib.parse import quote, unquote

from django.conf import settings
from django.core.cache import caches
from django.core.cache.backends.dummy import DummyCache
from django.core.cache.backends.locmem import LocMemCache
from django.db import transaction
from django.utils import timezone
from rest_framework.authtoken.models import Token

from agents_app import selectors
from agents_app.models import Agent
from agents_app.runtime.toolset import ToolsetFunction, qualify
from agents_app.services.chat import build_toolset
from core import hotcache
from core.codes import ApiCode, Reason
from core.errors import NotFound
from core.secrets import redact, scrub_text
from core.throttle import take as take_throttle
from tenants_app import auth_cache
from tenants_app.models import Role, Tenant
from tenants_app.policies import MEMBERS
from tenants_app.selectors import membership_get
from tools_app import adapters
from tools_app import selectors as tool_selectors
from tools_app.configs import secret_values
from tools_app.errors import ToolNotFound
from tools_app.models import (
    Approval,
    ApprovalStatus,
    ApprovalVia,
    CallStatus,
    Safety,
    Tool,
    ToolCall,
    ToolFunction,
    ToolType,
)
from tools_app.runtime import result as codes
from tools_app.runtime.result import ToolResult
from tools_app.services.approvals import approval_decide, approval_request, may_decide, needs_approval
from tools_app.services.audit import audit
from tools_app.services.invoke import CallRefused, check_callable, tool_invoke

logger = logging.getLogger(__name__)
VIA = ApprovalVia.GATEWAY


@dataclass(frozen=True)
class Principal:
    """One authenticated request to one agent's endpoint: the user, their role there, the agent."""

    user: Any
    tenant: Tenant
    role: Role
    agent: Agent

    @property
    def may_call(self) -> bool:
        return MEMBERS.allows_role(self.role, user=self.user)

    @property
    def key(self) -> tuple[int, int]:
        return (int(self.user.pk), int(self.agent.pk))


@dataclass(frozen=True)
class GatewayFunction:
    """A toolset function as an MCP tool: the qualified name and the definition as the server sent it (its own
    input schema, not chat's model-facing one; output schema, annotations, `_meta`, icons), with the hints of
    Toolhub's effective safety and a title where the server gave none."""

    name: str
    description: str
    input_schema: dict[str, Any]
    title: str
    read_only: bool
    destructive: bool
    function: ToolsetFunction = field(compare=False)
    output_schema: dict[str, Any] | None = None
    annotations: Mapping[str, Any] | None = None
    meta: Mapping[str, Any] | None = None
    icons: tuple[Mapping[str, Any], ...] = ()

    def wire(self) -> dict[str, Any]:
        """Everything a client sees; its hash is the toolset fingerprint."""
        return {"name": self.name, "description": self.description, "inputSchema": self.input_schema,
                "title": self.title, "readOnly": self.read_only, "destructive": self.destructive,
                "outputSchema": self.output_schema, "annotations": dict(self.annotations or {}),
                "_meta": dict(self.meta or {}), "icons": [dict(i) for i in self.icons]}


@dataclass
class CallOutcome:
    """What tools/call answers: a result, or a pending approval the client must have decided."""

    result: ToolResult
    call_id: int | None = None
    approval_id: int | None = None
    function: GatewayFunction | None = None
    arguments: dict[str, Any] = field(default_factory=dict)

    @property
    def held(self) -> bool:
        """The call waits for a person's decision on `approval_id`."""
        return self.approval_id is not None and self.result.error_code == codes.APPROVAL_REQUIRED


# --- who is calling -------------------------------------------------------------------------------


def user_for_token(key: str) -> Any | None:
    """The active user an API token (`create_token`) belongs to, else None (the API's cached lookup)."""
    if not key or len(key) > 128:
        return None

    def load() -> tuple[Any, Any] | None:
        token = Token.objects.select_related("user").filter(key=key).first()
        return (token.user, token) if token is not None else None

    found = auth_cache.cached("token", key, load)
    if found is None or not found[0].is_active:
        return None
    return found[0]


def authenticate(*, token: str, tenant_slug: str, agent_id: str) -> Principal | None:
    """user_for_token + resolve in one go: None for a bad token, NotFound as resolve raises it."""
    user = user_for_token(token)
    if user is None:
        return None
    return resolve(user=user, tenant_slug=tenant_slug, agent_id=agent_id)


def resolve(*, user: Any, tenant_slug: str, agent_id: str) -> Principal:
    """The caller's membership and the agent; NotFound alike for a foreign tenant, a missing or foreign agent.

    Warm, nothing here queries: the membership is cached (tenants_app.auth_cache) and the agent this user
    may use is kept in memory until the tenant's agents or anyone's grants change (core.hotcache).
    """
    membership = membership_get(user=user, tenant_slug=tenant_slug)
    tenant = membership.tenant

    def load() -> Agent | None:
        try:
            agent = selectors.agent_get(tenant=tenant, agent_id=agent_id)
        except NotFound:
            return None
        # Disabled or not granted: the same answer as a missing agent.
        return agent if selectors.agent_may_use(tenant=tenant, user=user, agent=agent) else None

    agent = hotcache.remembered("gateway-agent", (tenant.pk, user.pk, str(agent_id)),
                                (hotcache.AUTH, hotcache.tenant_scope(tenant.pk)), load)
    if agent is None:
        raise NotFound()
    return Principal(user=user, tenant=tenant, role=Role(membership.role), agent=agent)


# Principals of recent requests by (token digest, tenant slug, agent id), kept in core.hotcache under the
# generations of `auth` and their tenant: every change that could alter one bumps one of those, so a kept
# principal whose generations still stand is exactly what authenticate() would answer.
_PRINCIPALS = "gateway-principal"


def _principal_scopes(principal: Principal) -> tuple[str, ...]:
    return hotcache.AUTH, hotcache.tenant_scope(principal.tenant.pk)


def _remember_key(token: str, tenant_slug: str, agent_id: str) -> tuple[str, str, str]:
    return hashlib.sha256(token.encode()).hexdigest(), tenant_slug, str(agent_id)


def _remember_ttl() -> float:
    return float(min(settings.TOOLHUB_AUTH_CACHE_S, settings.TOOLHUB_HOT_CACHE_S))


def shared_cache_is_local() -> bool:
    """Whether the cache holding the generations is this process's memory (no Redis): reading it does no I/O,
    so the event loop may read it itself rather than hop to a worker thread."""
    return isinstance(caches["default"], LocMemCache | DummyCache)


def remembered_principal(*, token: str, tenant_slug: str, agent_id: str) -> Principal | None:
    """The principal an earlier request authenticated for this token and agent, if nothing it rests on has
    changed since (one read of two generation numbers); None when authenticate() must decide."""
    if _remember_ttl() <= 0:
        return None
    found: Principal | None = hotcache.recall(_PRINCIPALS, _remember_key(token, tenant_slug, agent_id),
                                              _principal_scopes)
    return found


def authenticate_remembering(*, token: str, tenant_slug: str, agent_id: str) -> Principal | None:
    """authenticate(), answered from (and stored for) remembered_principal. Run inside a hotcache request
    scope (the gateway's db()), so the generations stored with a principal are those read before its rows."""
    found = remembered_principal(token=token, tenant_slug=tenant_slug, agent_id=agent_id)
    if found is not None:
        return found
    principal = authenticate(token=token, tenant_slug=tenant_slug, agent_id=agent_id)
    ttl = _remember_ttl()
    if principal is not None:
        hotcache.keep(_PRINCIPALS, _remember_key(token, tenant_slug, agent_id), _principal_scopes(principal), principal,
                      ttl=ttl)
    return principal


def refresh(principal: Principal) -> Principal:
    """The same principal with the agent (name, description, status) reloaded; NotFound once it is gone."""
    return resolve(user=principal.user, tenant_slug=principal.tenant.slug, agent_id=str(principal.agent.pk))


# --- the agent's functions ------------------------------------------------------------------------


@dataclass(frozen=True)
class Listing:
    """What tools/list answers one user for one agent, by name, and its fingerprint."""

    functions: tuple[GatewayFunction, ...]
    by_name: Mapping[str, GatewayFunction]
    fingerprint: str
    valid_until: float | None = None  # a linked tool's breaker pause runs out then (time.time())


def listing(principal: Principal) -> Listing:
    """The agent's functions for this user, assembled once and kept in memory until anything they depend on
    changes: the tenant's tools, functions, agents and links, or anyone's role or grants (the same changes
    that make tools/list answer differently and so send list_changed), or a breaker's pause running out."""
    key = (principal.tenant.pk, principal.agent.pk, principal.user.pk)
    return hotcache.remembered("gateway-listing", key, (hotcache.AUTH, hotcache.tenant_scope(principal.tenant.pk)),
                               lambda: _assemble(principal), valid_until=lambda made: made.valid_until)


def _assemble(principal: Principal) -> Listing:
    toolset, _secrets = build_toolset(tenant=principal.tenant, actor=principal.user, agent=principal.agent)
    linked = [link.tool_id for link in principal.agent.agent_tools.all()]
    keys = {(f.tool_id, f.function) for f in toolset}
    # The definitions as the servers sent them (chat's toolset carries the model-facing input schema).
    sent: dict[tuple[int, str], dict[str, Any]] = {}
    if keys:
        rows = ToolFunction.objects.filter(tool__tenant=principal.tenant, tool_id__in={k[0] for k in keys}).values(
            "tool_id", "name", "input_schema", "output_schema", "annotations", "title", "meta", "icons")
        sent = {(row["tool_id"], row["name"]): dict(row) for row in rows if (row["tool_id"], row["name"]) in keys}
    functions = tuple(_gateway_function(f, sent.get((f.tool_id, f.function)) or {}) for f in toolset)
    # A paused tool comes back when its pause runs out, with no write to signal it: the listing lives no longer.
    paused = (Tool.objects.filter(tenant=principal.tenant, pk__in=linked, disabled_until__gt=timezone.now())
              .order_by("disabled_until").values_list("disabled_until", flat=True).first()) if linked else None
    return Listing(functions=functions, by_name=MappingProxyType({f.name: f for f in functions}),
                   fingerprint=fingerprint_of(principal, list(functions)),
                   valid_until=paused.timestamp() if paused is not None else None)


def _gateway_function(f: ToolsetFunction, row: dict[str, Any]) -> GatewayFunction:
    annotations = dict(row.get("annotations") or {}) if isinstance(row.get("annotations"), dict) else {}
    title = row.get("title") or annotations.get("title") or f"{f.tool_name}: {f.function}"
    annotations.setdefault("title", title)
    # Toolhub states the safety its approval rule uses (an admin's override, a DESTRUCTIVE tool): where the
    # server's own hints say so too, a client sees exactly what the server sent.
    annotations["readOnlyHint"] = f.safety == Safety.READ_ONLY
    annotations["destructiveHint"] = f.safety == Safety.DESTRUCTIVE
    icons = row.get("icons")
    return GatewayFunction(
        name=f.qualified_name,
        description=f.description,
        input_schema=row.get("input_schema") or f.parameters,
        title=str(title),
        read_only=f.safety == Safety.READ_ONLY,
        destructive=f.safety == Safety.DESTRUCTIVE,
        function=f,
        output_schema=row.get("output_schema") or None,
        annotations=MappingProxyType(annotations),
        meta=MappingProxyType(dict(row["meta"])) if isinstance(row.get("meta"), dict) else None,
        icons=tuple(i for i in icons if isinstance(i, dict)) if isinstance(icons, list) else (),
    )


def list_functions(principal: Principal) -> list[GatewayFunction]:
    """The agent's functions exactly as chat assembles them for this user, with MCP annotations."""
    return list(listing(principal).functions)


def fingerprint(principal: Principal) -> str:
    """A hash of what tools/list shows this user for this agent (and the agent's identity); '' once gone."""
    try:
        current = refresh(principal)
    except NotFound:
        return ""
    return listing(current).fingerprint


def fingerprint_of(principal: Principal, functions: list[GatewayFunction]) -> str:
    """The fingerprint of a listing just made for a freshly resolved principal (no second query)."""
    listing = [f.wire() for f in functions]
    blob = json.dumps([principal.agent.name, principal.agent.description, listing], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


# --- calls ----------------------------------------------------------------------------------------


def call_function(principal: Principal, name: str, arguments: dict[str, Any]) -> CallOutcome:
    """Call one function by its qualified name, through the same service as `/tools/{id}/invoke/`.

    A call that needs approval is held (tools_app.services.approvals); approving it runs it once. When
    the same user calls the same function with the same arguments through this agent after that, the
    run's result is answered (once) instead of a second run or a second request. Every call counts against
    the user's invoke throttle, as `/tools/{id}/invoke/` does (Refusal `throttled` once it is spent).
    """
    throttle(principal)
    functions = listing(principal).by_name
    fn = functions.get(name)
    if fn is None:
        return CallOutcome(_unlisted(principal, name) or ToolResult.refused(
            Reason.UNKNOWN_FUNCTION, f"unknown tool {name!r}; available: {sorted(functions)}"))
    if not principal.may_call:
        return CallOutcome(ToolResult.refused(
            Reason.VIEWER_MAY_NOT_CALL,
            f"viewers may list this agent's tools but not call them (you are {principal.role.value})"))
    target = fn.function
    if target.needs_approval:
        delivered = _collect_approved(principal, fn, arguments)
        if delivered is not None:
            return delivered
        pending = _pending_same(principal, fn, arguments)
        if pending is not None:
            return pending
        held = _hold(principal, fn, arguments)
        if held is not None:
            return held
    done = tool_invoke(tenant=principal.tenant, actor=principal.user, tool_id=target.tool_id,
                       function=target.function, arguments=arguments, agent=principal.agent, via=VIA)
    return CallOutcome(done.result, call_id=done.call.pk, function=fn, arguments=arguments,
                       approval_id=done.approval.pk if done.approval is not None else None)


def _unlisted(principal: Principal, name: str) -> ToolResult | None:
    """Why a name of one of the agent's own tools is not listed now (paused by its breaker, disabled, changed
    and awaiting review, not usable by this user): invoke's own refusal, so a client is told what to wait for
    instead of "unknown tool". None for a name the agent does not have. Runs on a miss only."""
    for link in principal.agent.agent_tools.select_related("tool").filter(tool__tenant=principal.tenant):
        for function in link.tool.functions.all():
            if qualify(link.tool.name, function.name) != name:
                continue
            try:
                check_callable(tenant=principal.tenant, actor=principal.user, tool=link.tool,
                               function=function.name, arguments={})
            except CallRefused as exc:
                if exc.code != codes.INVALID_PARAMS:
                    return exc.result()
            return None
    return None


def _hold(principal: Principal, fn: GatewayFunction, arguments: dict[str, Any]) -> CallOutcome | None:
    """Hold a valid call for a person; None when invoke would refuse it anyway (it then reports why).

    The toolset's rule (which includes the agent link's flag) decides here, so a call is held even when
    only the link asks for approval.
    """
    tool = tool_selectors.tool_get(tenant=principal.tenant, tool_id=fn.function.tool_id)
    try:
        check_callable(tenant=principal.tenant, actor=principal.user, tool=tool, function=fn.function.function,
                       arguments=arguments)
    except CallRefused:
        return None
    approval = approval_request(tenant=principal.tenant, actor=principal.user, tool=tool,
                                function=fn.function.function, arguments=arguments, agent=principal.agent,
                                via=ApprovalVia.GATEWAY)
    return CallOutcome(ToolResult.fail(codes.APPROVAL_REQUIRED, approval.tool_call.error),
                       call_id=approval.tool_call_id, approval_id=approval.pk, function=fn, arguments=arguments)


def _same_call(principal: Principal, fn: GatewayFunction, status: str) -> Any:
    return (
        Approval.objects.filter(tenant=principal.tenant, requested_by=principal.user, via=ApprovalVia.GATEWAY,
                                status=status, tool_call__agent=principal.agent, tool_call__tool_id=fn.function.tool_id,
                                tool_call__function=fn.function.function,
                                tool_call__status=CallStatus.AWAITING_APPROVAL)
        .select_related("tool_call")
        .order_by("id")
    )


def _pending_same(principal: Principal, fn: GatewayFunction, arguments: dict[str, Any]) -> CallOutcome | None:
    """A retry while the request is still undecided names the same pending approval (no duplicates)."""
    shown = redacted_arguments(principal, fn, arguments)
    for approval in _same_call(principal, fn, ApprovalStatus.PENDING).filter(expires_at__gt=timezone.now()):
        if approval.tool_call.arguments == shown:
            return CallOutcome(ToolResult.fail(codes.APPROVAL_REQUIRED, approval.tool_call.error),
                               call_id=approval.tool_call_id, approval_id=approval.pk, function=fn,
                               arguments=arguments)
    return None


@transaction.atomic
def _collect_approved(principal: Principal, fn: GatewayFunction, arguments: dict[str, Any]) -> CallOutcome | None:
    """The result of an approved request for this very call (approving ran it), handed over once."""
    shown = redacted_arguments(principal, fn, arguments)
    for approval in _same_call(principal, fn, ApprovalStatus.APPROVED).select_for_update(of=("self",)):
        held = approval.tool_call
        if held.arguments != shown:
            continue
        runs = (ToolCall.objects.filter(tenant=principal.tenant, actor=principal.user, agent=principal.agent,
                                        tool_id=held.tool_id, function=held.function, via=VIA, pk__gt=held.pk)
                .exclude(status=CallStatus.AWAITING_APPROVAL).order_by("id"))
        run = next((r for r in runs if r.arguments == held.arguments and not _is_held(r)), None)
        if run is None:
            continue  # approved but not run yet (the decision is being carried out right now)
        _delivered(held, run)
        return CallOutcome(_result_of(run), call_id=run.pk, approval_id=approval.pk, function=fn,
                           arguments=arguments)
    return None


def _is_held(call: ToolCall) -> bool:
    """A row that is itself a held request (not a run)."""
    return Approval.objects.filter(tool_call=call).exists()


def _delivered(held: ToolCall, run: ToolCall) -> None:
    # The held row leaves AWAITING_APPROVAL inside the locking transaction: the result is handed over once.
    held.status = run.status
    held.error = f"approved; ran as call {run.pk}; result handed to the MCP client"
    held.save(update_fields=["status", "error"])


HANDED_OVER = "handed_over"  # ToolResult.meta: rebuilt from an approved run's audit row, not the server's answer


def _result_of(run: ToolCall) -> ToolResult:
    """A recorded run as a result (its audit excerpt: capped, secrets already scrubbed)."""
    if run.status != CallStatus.OK:
        return ToolResult.fail(run.error_code or codes.EXECUTION_ERROR, run.error or "the approved call failed")
    content = [b for b in (run.result_content or []) if isinstance(b, dict) and b.get("type") != "omitted"]
    data = None
    if run.result_size == len(run.result_excerpt):  # kept whole: a JSON object there is the structured result
        try:
            data = json.loads(run.result_excerpt)
        except ValueError:
            data = None
    return ToolResult.ok(data=data if isinstance(data, dict) else None, text=run.result_excerpt,
                         content=content or None, **{HANDED_OVER: True})


def decided_in_toolhub_only(principal: Principal) -> bool:
    """The tenant's policy that approvals asked through the gateway are decided only in Toolhub (read from the
    row: the principal's tenant may be a remembered copy)."""
    return bool(Tenant.objects.filter(pk=principal.tenant.pk).values_list("gateway_approvals_in_toolhub_only",
                                                                          flat=True).first())


def decide_and_run(principal: Principal, outcome: CallOutcome, *, approve: bool) -> CallOutcome | None:
    """The person at the client answered the elicitation: record the decision; approving runs the call once.

    None, deciding nothing, when the tenant has since ruled that gateway approvals are decided only in Toolhub.
    """
    assert outcome.approval_id is not None and outcome.function is not None
    if decided_in_toolhub_only(principal):
        return None
    decision = approval_decide(tenant=principal.tenant, actor=principal.user, approval_id=outcome.approval_id,
                               approve=approve)
    if not approve or decision.invocation is None:
        return CallOutcome(ToolResult.fail(codes.APPROVAL_REQUIRED, "the call was declined at the client; not run"),
                           call_id=outcome.call_id, approval_id=outcome.approval_id)
    done = decision.invocation
    _delivered(decision.approval.tool_call, done.call)
    return CallOutcome(done.result, call_id=done.call.pk, approval_id=outcome.approval_id,
                       function=outcome.function, arguments=outcome.arguments)


def self_approval_allowed(principal: Principal, approval_id: int) -> bool:
    """Whether the person at the client may decide their own request: not when the tenant keeps gateway
    approvals to Toolhub, nor under the second-person rule."""
    if decided_in_toolhub_only(principal):
        return False
    approval = Approval.objects.get(tenant=principal.tenant, pk=approval_id)
    allowed, _why = may_decide(tenant=principal.tenant, actor=principal.user, approval=approval)
    return allowed


def _secrets(principal: Principal, fn: GatewayFunction) -> list[str]:
    try:
        return list(tool_selectors.tool_snapshot(tenant=principal.tenant, tool_id=fn.function.tool_id).secrets)
    except ToolNotFound:
        return []  # deleted since the listing: nothing of it can be in a result any more


def redacted_arguments(principal: Principal, fn: GatewayFunction, arguments: dict[str, Any]) -> dict[str, Any]:
    redacted: dict[str, Any] = redact(arguments, _secrets(principal, fn))
    return redacted


def secrets_of(principal: Principal, fn: GatewayFunction | None) -> list[str]:
    """The secret values of the function's tool, which a result must never show."""
    return [] if fn is None else _secrets(principal, fn)


# --- prompts and resources of the agent's MCP tools (namespaced like functions, under the same rules) -----

RESOURCE_SCHEME = "toolhub"
# The audit rows' function names for a prompt get and a resource read: an MCP tool name cannot contain "/".
PROMPT_GET = "prompts/get"
RESOURCE_READ = "resources/read"


class Refusal(Exception):
    """A typed refusal of a gateway request (the server answers it as a JSON-RPC error whose data carries `code`)."""

    def __init__(self, code: str, message: str, **details: Any) -> None:
        super().__init__(message)
        self.code, self.message, self.details = code, message, details


def _mcp_tools(principal: Principal) -> list[Tool]:
    """The agent's MCP tools that offer this user at least one function (so usable, enabled, not backed off)."""
    ids = {f.function.tool_id for f in list_functions(principal)}
    return list(Tool.objects.filter(tenant=principal.tenant, pk__in=ids, type__in=(ToolType.LOCAL, ToolType.REMOTE))
                .order_by("name"))


def _from_each(principal: Principal, op: Any) -> list[tuple[Tool, Any]]:
    out = []
    for tool in _mcp_tools(principal):
        try:
            out.append((tool, adapters.pool().session_request(adapters.server_spec(tool), op)))
        except Exception as exc:  # noqa: BLE001 - a server without prompts/resources (or down) offers none
            logger.info("gateway: %s offers no listing: %s", tool.name, type(exc).__name__)
    return out


def _dump(model: Any, secrets: list[str]) -> dict[str, Any]:
    raw = json.dumps(model.model_dump(by_alias=True, mode="json", exclude_none=True))
    loaded: dict[str, Any] = json.loads(scrub_text(raw, secrets) if secrets else raw)
    return loaded


def throttle(principal: Principal) -> None:
    """Count one call against the user's invoke throttle (the API's key and rate); Refusal when it is spent."""
    wait = take_throttle("invoke", principal.user)
    if wait is not None:
        seconds = max(1, int(wait))
        raise Refusal(ApiCode.THROTTLED, f"too many calls: the invoke rate of this token is spent; retry in {seconds} s",
                      retry_after_s=seconds)


def _upstream(principal: Principal, tool: Tool, function: str, arguments: dict[str, Any], op: Any,
              title: str) -> dict[str, Any]:
    """A prompt get or resource read under the rules of a tool call: the caller may call (not a viewer), the
    approval rule (tool, link, safety) does not hold it, the throttle has room; audited whatever happens."""
    secrets = secret_values(tool.type, tool.config)

    def refuse(result: ToolResult, wire_code: ApiCode, **details: Any) -> Refusal:
        audit(tenant=principal.tenant, actor=principal.user, tool=tool, function=function, arguments=arguments,
              result=result, status=CallStatus.DENIED, secrets=secrets, agent=principal.agent, via=VIA, title=title)
        return Refusal(wire_code, result.error or "", **details)

    if not principal.may_call:
        raise refuse(ToolResult.refused(Reason.VIEWER_MAY_NOT_CALL,
                                        f"viewers may list this agent's prompts and resources but not use them "
                                        f"(you are {principal.role.value})"), ApiCode.PERMISSION_DENIED)
    link = principal.agent.agent_tools.filter(tool=tool).first()
    if needs_approval(tool, None, link.requires_approval if link is not None else None):
        # A held call runs its function once approved; a prompt or resource has none to run, so it is refused.
        raise refuse(ToolResult.fail(
            codes.APPROVAL_REQUIRED,
            f"{tool.name} needs a person's approval for every use, and a prompt or resource cannot be "
            "held for one: use the tool's functions (their calls are held for approval) or ask an admin "
            "to lift the tool's requires_approval"), ApiCode.APPROVAL_REQUIRED, tool=tool.name)
    throttle(principal)
    started = time.monotonic()
    try:
        answer = _dump(adapters.pool().session_request(adapters.server_spec(tool), op), secrets)
    except Exception as exc:  # noqa: BLE001 - the server's failure is the caller's answer, typed and audited
        message = scrub_text(str(getattr(exc, "message", "") or type(exc).__name__), secrets)[:500]
        failed = ToolResult.fail(codes.EXECUTION_ERROR, message)
        failed.cost_ms = int((time.monotonic() - started) * 1000)
        audit(tenant=principal.tenant, actor=principal.user, tool=tool, function=function, arguments=arguments,
              result=failed, status=CallStatus.ERROR, secrets=secrets, agent=principal.agent, via=VIA, title=title)
        raise Refusal(ApiCode.UPSTREAM_ERROR, f"{tool.name} answered an error: {message}", tool=tool.name) from None
    done = ToolResult.ok(text=json.dumps(answer, ensure_ascii=False))
    done.cost_ms = int((time.monotonic() - started) * 1000)
    audit(tenant=principal.tenant, actor=principal.user, tool=tool, function=function, arguments=arguments,
          result=done, status=CallStatus.OK, secrets=secrets, agent=principal.agent, via=VIA, title=title)
    return answer


def list_prompts(principal: Principal) -> list[dict[str, Any]]:
    async def op(session: Any) -> Any:
        return await session.list_prompts()

    prompts = []
    for tool, listed in _from_each(principal, op):
        for prompt in listed.prompts:
            item = _dump(prompt, secret_values(tool.type, tool.config))
            item["name"] = qualify(tool.name, prompt.name)
            prompts.append(item)
    return prompts


def _split(principal: Principal, qualified: str) -> tuple[Tool, str]:
    for tool in _mcp_tools(principal):
        prefix = qualify(tool.name, "")
        if qualified.startswith(prefix):
            return tool, qualified[len(prefix):]
    raise NotFound()


def get_prompt(principal: Principal, name: str, arguments: dict[str, str] | None) -> dict[str, Any]:
    tool, original = _split(principal, name)

    async def op(session: Any) -> Any:
        return await session.get_prompt(original, arguments or {})

    return _upstream(principal, tool, PROMPT_GET, {"name": original, "arguments": dict(arguments or {})}, op,
                     f"{tool.name}: prompt {original}"[:200])


def _resource_uri(tool: Tool, uri: str) -> str:
    return f"{RESOURCE_SCHEME}://{tool.name}/{quote(uri, safe='')}"


def list_resources(principal: Principal) -> list[dict[str, Any]]:
    async def op(session: Any) -> Any:
        return await session.list_resources()

    resources = []
    for tool, listed in _from_each(principal, op):
        for resource in listed.resources:
            item = _dump(resource, secret_values(tool.type, tool.config))
            item["uri"] = _resource_uri(tool, str(resource.uri))
            item["name"] = qualify(tool.name, resource.name)
            resources.append(item)
    return resources


def read_resource(principal: Principal, uri: str) -> dict[str, Any]:
    prefix = f"{RESOURCE_SCHEME}://"
    if not uri.startswith(prefix) or "/" not in uri[len(prefix):]:
        raise NotFound()
    tool_name, encoded = uri[len(prefix):].split("/", 1)
    tool = next((t for t in _mcp_tools(principal) if t.name == tool_name), None)
    if tool is None:
        raise NotFound()
    original = unquote(encoded)

    async def op(session: Any) -> Any:
        return await session.read_resource(original)

    result = _upstream(principal, tool, RESOURCE_READ, {"uri": original}, op, f"{tool.name}: {original}"[:200])
    for item in result.get("contents", []):
        item["uri"] = uri if item.get("uri") == original else _resource_uri(tool, str(item.get("uri", "")))
    return result
