"""Invoke one function of a tool: checks, the runtime call (MCP/HTTP outside any transaction), the audit row."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from core import hotcache, tracing
from core.codes import ApiCode, Reason, error_body
from core.db import release_pooled_connection
from core.secrets import scrubber
from tenants_app.models import Tenant
from tools_app import selectors
from tools_app.configs import secret_values
from tools_app.configs.auth import acts_as_user
from tools_app.models import (
    Approval,
    ApprovalVia,
    CallStatus,
    Tool,
    ToolCall,
    ToolFunction,
    ToolType,
)
from tools_app.policies import CALLS
from tools_app.runtime import registry
from tools_app.runtime import result as codes
from tools_app.runtime.errors import RuntimeToolError
from tools_app.runtime.http_tool import run_http_tool
from tools_app.runtime.mcp.client_requests import INPUT_REQUIRED, ClientRequests
from tools_app.runtime.mcp.spec import ServerSpec
from tools_app.runtime.result import ToolResult
from tools_app.runtime.schemas import validate_arguments
from tools_app.runtime.screen.results import screened
from tools_app.services import breaker, plugins, quota_refusals, quotas
from tools_app.services.approval_gate import (
    approval_message,
    approval_request,
    approval_screen,
    needs_approval,
)
from tools_app.services.audit import audit, resumed, settle
from tools_app.wiring import pool as wiring_pool
from tools_app.wiring import specs as wiring_specs
from tools_app.wiring.http import outbound_policy
from tools_app.wiring.specs import builtin_context, http_spec
from tools_app.wiring.tokens import not_connected

logger = logging.getLogger(__name__)

# Calls refused for bad input: the admin's "Refused calls" lists these.
REFUSED_CODES = (codes.INVALID_PARAMS, codes.REFUSED)
# Failures that say the server is unwell (they feed the breaker); business errors do not.
BREAKER_CODES = {codes.EXECUTION_ERROR, codes.TIMEOUT}
# Failures that say what this caller lacks (a connection, their own keys): nothing about the server's health.
CALLER_CODES = {codes.AUTHORIZATION_REQUIRED, codes.CREDENTIALS_REQUIRED}
# Seconds a caller is told to wait after a deployment outage (no LOCAL server runner reachable).
OUTAGE_RETRY_AFTER_S = 2


@dataclass
class Invocation:
    result: ToolResult
    call: ToolCall
    approval: Approval | None = None  # set when the call was held for a person
    changes: dict[str, Any] | None = None  # a trial run's rolled-back changes
    withheld: bool = False  # a trial run of a call that needs approval: its result is not handed out

    def outage(self) -> dict[str, Any] | None:
        """The error envelope of a call the deployment could not run (`runner_unavailable`: no LOCAL server runner
        reachable), or None: an outage is answered as the API's typed 503, never as the tool's EXECUTION_ERROR."""
        code = self.result.meta.get("outage")
        if self.result.success or not code:
            return None
        return error_body(str(code), self.result.error or "the deployment could not run the call; retry shortly",
                          {"service": "runner", "retry_after_s": OUTAGE_RETRY_AFTER_S, "call_id": self.call.pk})

    def body(self) -> dict[str, Any]:
        out = {**self.result.as_dict(), "call_id": self.call.pk}
        if getattr(self.call, "folded", False):  # a quota refusal counted with others of its minute, stored with them
            out["audit"] = {"folded": True}
        elif self.call.pk is None:  # the call ran during a database outage: its audit row is spooled, stored later
            out["audit"] = {"spooled": True, "call_uid": str(self.call.call_uid)}
        if self.call.title:
            out["title"] = self.call.title
        if self.call.dry_run:
            out.update(dry_run=True, changes=self.changes)
            if self.withheld:
                out["result_withheld"] = True
        if self.approval is not None:
            out.update(approval_id=self.approval.pk, warning=self.approval.warning or None,
                       summary=self.approval.summary or None, expires_at=self.approval.expires_at.isoformat())
        return out


def check_callable(*, tenant: Tenant, actor: Any, tool: Tool, function: str, arguments: Any,
                   snapshot: selectors.ToolSnapshot | None = None, agent: Any = None) -> ToolFunction:
    """Everything that must hold before a call; raises CallRefused with a ToolResult code.

    Who may call what is tools_app.policies.CALLS (with `agent`, its use_agent grant and link too); then the
    arguments must fit the function's schema. With the tool's `snapshot`, its functions and the user's
    callable tools come from memory (core.hotcache); without, from the database.
    """
    functions: Mapping[str, ToolFunction] | None = snapshot.functions if snapshot is not None else None
    if functions is None:
        functions = {f.name: f for f in tool.functions.all()}
    refusal = CALLS.why_not(tenant=tenant, user=actor, tool=tool, function=function, functions=functions,
                            agent=agent, warm=snapshot is not None)
    if refusal is not None:
        if refusal.reason == Reason.FUNCTION_MISSING and not functions:
            # An OAuth tool never connected was never listed: connecting it comes first (with the link), as for
            # a connected one whose grant expired.
            unconnected = not_connected(tenant=tenant, tool=tool, user=actor)
            if unconnected:
                raise CallRefused(codes.AUTHORIZATION_REQUIRED, unconnected)
        raise CallRefused(refusal.code, refusal.message, reason=refusal.reason)
    fn = functions[function]
    if not isinstance(arguments, dict):
        raise CallRefused(codes.INVALID_PARAMS, "arguments must be a JSON object")
    try:
        validate_arguments(fn.input_schema, arguments)
    except RuntimeToolError as exc:
        raise CallRefused(codes.INVALID_PARAMS, exc.message) from None
    return fn


class CallRefused(Exception):
    """A call that may not happen: `code` its result family, `reason` the distinct cause (core.codes) if any."""

    def __init__(self, code: str, message: str, reason: str | None = None, **meta: Any) -> None:
        super().__init__(message)
        self.code, self.message, self.reason, self.meta = code, message, reason, meta

    def result(self) -> ToolResult:
        result = ToolResult.fail(self.code, self.message, **self.meta)
        result.error_reason = self.reason
        return result


def run_registered(tool: Tool, function: str, arguments: Any, actor: Any = None) -> ToolResult:
    """A registered tool (built-in, record tool, plugin) as `actor`, inside one transaction unless it opts out.

    In the transaction a failed call is rolled back whole: a tool never leaves half its writes behind.
    """
    ctx = builtin_context(tool.tenant, actor)
    try:
        spec = registry.get_tool(tool.builtin_name)
    except KeyError:
        spec = None
    if spec is None or spec.runs_outside_transaction:
        return registry.invoke_tool(tool.builtin_name, function, arguments, ctx)
    with transaction.atomic():
        result = registry.invoke_tool(tool.builtin_name, function, arguments, ctx)
        if not result.success:
            transaction.set_rollback(True)
    return result


def run(tool: Tool, function: str, arguments: dict[str, Any], on_progress: Any = None, actor: Any = None,
        client_requests: ClientRequests | None = None, server_spec: ServerSpec | None = None) -> ToolResult:
    """Dispatch to the runtime of the tool's type. Never raises for a tool failure.

    `server_spec` is the MCP pool's spec of the tool when the caller has it already (built from the same row).
    """
    started = time.monotonic()
    mcp = tool.type in (ToolType.LOCAL, ToolType.REMOTE)
    with tracing.span(f"tools/call {function}" if mcp else f"{tool.type.lower()} {function}",
                      {"mcp.method.name": "tools/call" if mcp else None, "gen_ai.tool.name": function,
                       "toolhub.tool": tool.name, "toolhub.tool.type": tool.type}, kind="client") as current:
        try:
            if tool.type != ToolType.BUILTIN:
                # It waits on another process or system: a cold call (its snapshot just loaded) gives its pooled
                # DB connection back first; a warm one has made no query yet and holds none.
                release_pooled_connection()
            if mcp:
                result = wiring_pool.pool().call(server_spec or wiring_specs.server_spec(tool, actor), function, arguments,
                                              on_progress=on_progress, client_requests=client_requests)
            elif tool.type == ToolType.BUILTIN:
                result = run_registered(tool, function, arguments, actor)
            else:
                spec = http_spec(tool, actor)
                result = run_http_tool(spec, arguments,
                                       policy=outbound_policy(timeout_s=float(spec.timeout_s)))
        except RuntimeToolError as exc:
            result = ToolResult.fail(exc.result_code, exc.message)
        tracing.set_attributes(current, **{"toolhub.success": result.success,
                                           "error.type": result.error_code or None})
    result.cost_ms = result.cost_ms or int((time.monotonic() - started) * 1000)
    return result


def tool_invoke(
    *,
    tenant: Tenant,
    actor: Any,
    tool_id: Any,
    function: str,
    arguments: Any,
    approved: bool = False,
    agent: Any = None,
    conversation: Any = None,
    on_progress: Callable[[float, float | None, str | None], None] | None = None,
    via: str = ApprovalVia.INVOKE,
    dry_run: bool = False,
    client_requests: ClientRequests | None = None,
    continuing: int | None = None,
) -> Invocation:
    """Check, call and audit. `approved` is set only by the approval flow, never by a caller's input.

    A call that needs approval is held: for direct invoke and the gateway (`via`) an Approval is created
    that runs the call once approved; a chat holds its calls before they get here, so one arriving here
    unapproved (its policy changed mid-run) is refused. A registered tool may refuse the user up front
    (its refusal hook) or refuse the call before anyone is asked (before_approval).

    `dry_run` is a trial run: only for a registered tool whose effects a rollback undoes, run inside a
    transaction that is rolled back, without approval (nothing it does is kept); it answers what would
    have changed and is audited as a dry run. Any other tool refuses it (DRY_RUN_UNSUPPORTED).

    `client_requests` answers the server's sampling and elicitation requests during the call (the chat's);
    without it they are declined with the reason.

    `continuing` names the audit row of a call this one continues: a 2026-07-28 server's questions were handed back
    to the caller (the row is `awaiting_input`) and this is the round carrying the answers. It is the same call: its
    row takes this round's outcome (no second row), and it was counted against the quotas when it began, so this
    round holds only a concurrent slot while it runs. Set only by the gateway, for a round its sealed requestState
    vouches for (agents_app.gateway.relay.continued_call), never from a caller's input.
    """
    with tracing.span("toolhub.invoke", {"toolhub.tenant": tenant.slug, "toolhub.function": function,
                                         "toolhub.via": via, "toolhub.approved": approved,
                                         "toolhub.dry_run": dry_run}) as current:
        done = _invoke(tenant=tenant, actor=actor, tool_id=tool_id, function=function, arguments=arguments,
                       approved=approved, agent=agent, conversation=conversation, on_progress=on_progress, via=via,
                       dry_run=dry_run, client_requests=client_requests, continuing=continuing)
        tracing.set_attributes(current, **{"toolhub.tool": done.call.tool_name, "toolhub.call_id": done.call.pk,
                                           "toolhub.status": done.call.status,
                                           "error.type": done.result.error_code or None})
        return done


@dataclass
class _Ctx:
    """One call being invoked: who, what, through what, and the secrets its results are scrubbed of."""

    tenant: Tenant
    actor: Any
    tool: Tool
    function: str
    arguments: Any
    agent: Any
    conversation: Any
    via: str
    title: str
    dry_run: bool
    secrets: list[str]
    continuing: ToolCall | None = None  # the row of the call this round continues (awaiting input)

    def audit(self, result: ToolResult, status: str) -> ToolCall:
        if self.continuing is not None:
            return settle(self.continuing, result, status, self.secrets)
        return audit(tenant=self.tenant, actor=self.actor, tool=self.tool, function=self.function,
                     arguments=self.arguments, result=result, status=status, secrets=self.secrets, agent=self.agent,
                     conversation=self.conversation, via=self.via, title=self.title, dry_run=self.dry_run)

    def audit_outcome(self, result: ToolResult) -> ToolCall:
        if result.success and result.meta.get(INPUT_REQUIRED):  # handed back: the call goes on in a later round
            return self.audit(result, CallStatus.AWAITING_INPUT)
        return self.audit(result, CallStatus.OK if result.success else CallStatus.ERROR)


def _invoke(
    *, tenant: Tenant, actor: Any, tool_id: Any, function: str, arguments: Any, approved: bool, agent: Any,
    conversation: Any, on_progress: Callable[[float, float | None, str | None], None] | None, via: str,
    dry_run: bool, client_requests: ClientRequests | None = None, continuing: int | None = None,
) -> Invocation:
    # Warm, the tool, its functions and who may use it come from this process's memory (no query); any
    # change to them drops the snapshot in every process first (tools_app.selectors.tool_snapshot). A call
    # a person approved is rare and may have waited long: it is checked against the rows themselves.
    snapshot = selectors.tool_snapshot(tenant=tenant, tool_id=tool_id, fresh=approved)
    checked_against = None if approved else snapshot
    tool = snapshot.tool(tenant)
    ctx = _Ctx(tenant=tenant, actor=actor, tool=tool, function=function, arguments=arguments, agent=agent,
               conversation=conversation, via=via, title=plugins.call_title(tool, function, arguments),
               dry_run=dry_run, secrets=list(snapshot.secrets),
               continuing=_awaiting_input(tenant, actor, tool, function, continuing))
    # The one boundary: every result (body, audit, chat, breaker) is scrubbed here, before any cut.
    scrub = scrubber(ctx.secrets)
    spec = plugins.spec_for(tool)
    try:
        # A call a person approved may have waited: through an agent, its use_agent and link are checked again too.
        fn = check_callable(tenant=tenant, actor=actor, tool=tool, function=function, arguments=arguments,
                            snapshot=checked_against, agent=agent if approved else None)
        held = _gate(ctx, fn, spec, approved=approved)
    except CallRefused as refused:
        result = refused.result().scrubbed(scrub)
        return Invocation(result, ctx.audit(result, CallStatus.DENIED))
    if held is not None:
        return held
    try:
        # The one admission check of every call (API, chat, gateway, approvals): held while the call runs.
        with quotas.admitted(tenant=tenant, actor=actor, tool=tool, agent=agent,
                             counted=ctx.continuing is not None):
            return _admitted(ctx, checked_against, spec, fn, on_progress, client_requests, approved=approved,
                             scrub=scrub)
    except quotas.QuotaExceeded as spent:
        result = CallRefused(codes.QUOTA_EXCEEDED, str(spent), quota=spent.details).result().scrubbed(scrub)
        return Invocation(result, _refusal_audit(ctx, result, spent, approved=approved))


def _refusal_audit(ctx: _Ctx, result: ToolResult, spent: quotas.QuotaExceeded, *, approved: bool) -> ToolCall:
    """A quota refusal's audit: the first of its minute (per member, tool, function, agent, via) is a row; the ones
    after it are counted in Redis and folded into one row when the minute is over (tools_app.services.quota_refusals):
    a tenant hammering past its quota costs no database write per refused call. A call a person approved is never
    folded (its approval points at its row)."""
    if approved or not quota_refusals.enabled():
        return ctx.audit(result, CallStatus.DENIED)
    refusal = quota_refusals.Refusal(
        tenant_id=ctx.tenant.pk, tool_id=ctx.tool.pk, tool_name=ctx.tool.name, function=ctx.function[:128],
        actor_id=getattr(ctx.actor, "pk", None), agent_id=getattr(ctx.agent, "pk", None), via=ctx.via,
        scope=spent.spent.scope, target=spent.spent.target, limit=spent.spent.limit, minute=int(spent.now // 60))
    nth = quota_refusals.count(refusal, spent.now)
    if nth is not None and nth > 1:
        folded = ToolCall(tenant=ctx.tenant, tool=ctx.tool, tool_name=ctx.tool.name, function=ctx.function[:128],
                          actor=ctx.actor if getattr(ctx.actor, "pk", None) else None, agent=ctx.agent, via=ctx.via,
                          title=(ctx.title or ctx.tool.name)[:200], status=CallStatus.DENIED,
                          error_code=result.error_code or "", error=result.error or "")
        folded.folded = True  # type: ignore[attr-defined]  # Invocation.body says where its audit is
        from tools_app import metrics  # as the audit spool does: metrics read the models this module writes

        metrics._observe_call(ToolCall, folded)  # metrics count it now; its row comes with the minute's fold
        return folded
    call = ctx.audit(result, CallStatus.DENIED)
    if nth == 1:
        quota_refusals.recorded(refusal, call.pk)
    return call


def _awaiting_input(tenant: Tenant, actor: Any, tool: Tool, function: str, call_id: int | None) -> ToolCall | None:
    """The row a continuing round settles: this caller's call of this function, still awaiting input."""
    if call_id is None:
        return None
    return resumed(pk=call_id, tenant=tenant, tool=tool, function=function[:128],
                   actor=actor if getattr(actor, "pk", None) else None)


def _admitted(ctx: _Ctx, checked_against: selectors.ToolSnapshot | None, spec: Any,
              fn: ToolFunction, on_progress: Callable[[float, float | None, str | None], None] | None,
              client_requests: ClientRequests | None, *, approved: bool, scrub: Any) -> Invocation:
    """The call itself, once every check and quota admitted it: a trial run, or the runtime call and its audit."""
    tenant, tool, function, arguments, actor = ctx.tenant, ctx.tool, ctx.function, ctx.arguments, ctx.actor
    if ctx.dry_run:
        assert spec is not None
        return _trial_run(ctx, spec, fn, approved=approved, scrub=scrub)
    pool_spec = None
    if checked_against is not None and tool.type in (ToolType.LOCAL, ToolType.REMOTE) and not acts_as_user(tool):
        # Building the pool's spec from the stored config costs pydantic about half a millisecond per call: it is
        # kept with the snapshot it comes from (the same generation: a config change drops both).
        pool_spec = hotcache.remembered(
            "server-spec", (tenant.pk, tool.pk, tool.config_version, str(settings.TOOLHUB_WORKSPACE_ROOT)),
            (hotcache.tenant_scope(tenant.pk),), lambda: wiring_specs.server_spec(tool))
    result = run(tool, function, arguments, on_progress, actor=actor, client_requests=client_requests,
                 server_spec=pool_spec)
    tokens = selectors.live_secret_values(tenant=tenant, tool=tool)
    if tokens:
        # OAuth tokens rotate, so they are read after the call (which may have refreshed them), not cached; members'
        # own keys change whenever they set them.
        ctx.secrets += tokens
        scrub = scrubber(ctx.secrets)
    result = screened(result.scrubbed(scrub))  # invisible characters out, injection markers named (the screen)
    _record_health(tool, result)
    return Invocation(result, ctx.audit_outcome(result))


def _gate(ctx: _Ctx, fn: ToolFunction, spec: Any, *, approved: bool) -> Invocation | None:
    """What may stop a callable function before it runs: the tool's own refusal, a trial run it cannot take, or
    the approval rule (a held call outside chat answers its pending approval; chat holds it itself). Raises
    CallRefused; answers the held Invocation, or None when the call may run."""
    tenant, actor, tool, function, arguments = ctx.tenant, ctx.actor, ctx.tool, ctx.function, ctx.arguments
    reason = plugins.refusal(tenant=tenant, actor=actor, tool=tool)
    if reason:
        raise CallRefused(codes.REFUSED, reason)
    if ctx.dry_run:
        if spec is None or not spec.undone_by_rollback:
            raise CallRefused(codes.DRY_RUN_UNSUPPORTED, _no_trial_run(tool))
        return None
    if approved or not needs_approval(tool, fn):
        return None
    card = approval_screen(tenant=tenant, actor=actor, tool=tool, function=function, arguments=arguments)
    if card.refuse:
        raise CallRefused(codes.REFUSED, card.refuse)
    if ctx.via == ApprovalVia.CHAT:
        raise CallRefused(codes.APPROVAL_REQUIRED, approval_message(tool, function))
    approval = approval_request(tenant=tenant, actor=actor, tool=tool, function=function, arguments=arguments,
                                agent=ctx.agent, conversation=ctx.conversation, via=ctx.via, summary=card.text,
                                title=ctx.title)
    held = ToolResult.fail(codes.APPROVAL_REQUIRED, approval.tool_call.error)
    return Invocation(held, approval.tool_call, approval)


def _trial_run(ctx: _Ctx, spec: Any, fn: ToolFunction, *, approved: bool, scrub: Any) -> Invocation:
    """A dry run inside a rolled-back transaction: the result, and what it would change."""
    started = time.monotonic()
    result, changes = plugins.trial_run(spec, ctx.tool, ctx.function, ctx.arguments, ctx.actor)
    result.cost_ms = result.cost_ms or int((time.monotonic() - started) * 1000)
    # A trial run asks no one, so it must not hand out what a person's approval gates: the call's result.
    # What it would change (`changes`) is the point of a trial and stays.
    withheld = not approved and needs_approval(ctx.tool, fn)
    if withheld:
        result = _withheld(ctx.tool, ctx.function, result)
    result.scrubbed(scrub)
    return Invocation(result, ctx.audit_outcome(result),
                      changes=scrub.value(changes.as_dict()) if scrub else changes.as_dict(), withheld=withheld)


def _record_health(tool: Tool, result: ToolResult) -> None:
    """An MCP server's outcome for its breaker: a failure to run counts; a tool's own error, an outage of the
    deployment (no LOCAL runner live) and a refusal of the pool (the tenant at its fair share of server slots: the
    server never started) do not. Else a tenant hammering past its share would have its tools disabled for the
    breaker's cool-down, for every member."""
    if tool.type not in (ToolType.LOCAL, ToolType.REMOTE) or result.error_code in CALLER_CODES \
            or result.meta.get("outage") or result.meta.get("error_type") == ApiCode.CAPACITY_EXCEEDED:
        return
    if result.success or result.error_code not in BREAKER_CODES:
        if tool.consecutive_failures or tool.last_ok_at is None:
            breaker.record_outcome(tool_id=tool.pk, ok=True, tenant_id=tool.tenant_id)
    else:
        breaker.record_outcome(tool_id=tool.pk, ok=False, error=result.error or "", tenant_id=tool.tenant_id,
                              started_at=timezone.now() - timedelta(milliseconds=result.cost_ms or 0))


def call_refused(*, tenant: Tenant, actor: Any, tool_id: Any, function: str, arguments: Any, code: str,
                 message: str, agent: Any = None, conversation: Any = None, via: str = ApprovalVia.CHAT) -> ToolCall:
    """Audit a call refused before it reached `tool_invoke` (a chat's arguments failed the schema, or the
    tool refused before approval), so "Refused calls" shows what models keep getting wrong."""
    tool = selectors.tool_get(tenant=tenant, tool_id=tool_id)
    secrets = secret_values(tool.type, tool.config)
    result = ToolResult.fail(code, message).scrubbed(scrubber(secrets))
    return audit(tenant=tenant, actor=actor, tool=tool, function=function, arguments=arguments, result=result,
                 status=CallStatus.DENIED, secrets=secrets, agent=agent, conversation=conversation, via=via,
                 title=plugins.call_title(tool, function, arguments))


def _withheld(tool: Tool, function: str, result: ToolResult) -> ToolResult:
    """A trial run's result without what the approval gates: its data, text, content and error message."""
    note = (f"trial run only: {approval_message(tool, function)}, so its result is withheld; "
            "`changes` says what the call would change")
    if result.success:
        return ToolResult(success=True, text=note, cost_ms=result.cost_ms)
    return ToolResult(success=False, error_code=result.error_code, cost_ms=result.cost_ms,
                      error=f"the trial run failed ({result.error_code}); {note}")


def _no_trial_run(tool: Tool) -> str:
    kind = {ToolType.LOCAL: "an MCP server", ToolType.REMOTE: "an MCP server", ToolType.HTTP: "an HTTP tool"}.get(
        ToolType(tool.type), "a tool whose effects (files, processes, other systems) a database rollback cannot undo")
    return (f"a trial run (dry_run) is not possible for {tool.name!r}: it is {kind}, so nothing could take back "
            "what it does; call it without dry_run")
