"""tools/call through invoke: held for approval, collected once approved, refused typed; the gateway's throttle."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.core.cache import cache
from django.db import transaction
from django.utils import timezone

from agents_app.gateway import routing
from agents_app.gateway.listing import GatewayFunction, listing, redacted_arguments, secrets_of
from agents_app.gateway.oauth import usage as oauth_usage
from agents_app.gateway.principal import Principal
from agents_app.runtime.toolset import qualify
from core.codes import ApiCode, Reason
from core.errors import DomainError
from core.secrets import scrub_text
from core.throttle import take as take_throttle
from tenants_app.models import Tenant
from tools_app import selectors as tool_selectors
from tools_app.connections import oauth_flow, paths
from tools_app.models import (
    Approval,
    ApprovalStatus,
    ApprovalVia,
    CallStatus,
    ToolCall,
)
from tools_app.runtime import result as codes
from tools_app.runtime.mcp.client_requests import ClientRequests
from tools_app.runtime.result import RESULT_META, ToolResult
from tools_app.runtime.screen.results import META_KEY
from tools_app.services.approvals import approval_decide, approval_request, may_decide
from tools_app.services.audit import through_client
from tools_app.services.invoke import CallRefused, check_callable, tool_invoke

logger = logging.getLogger(__name__)
VIA = ApprovalVia.GATEWAY


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


# --- calls ----------------------------------------------------------------------------------------


Progress = Callable[[float, float | None, str | None], None]


AUTHORIZE_URL = "authorize_url"  # ToolResult.meta: the caller's own link to connect an OAuth tool
CONNECTIONS_URL = "connections_url"  # ToolResult.meta: the caller's page to set their own keys of a tool


BaseUrl = str | Callable[[], str]  # Toolhub's public origin, or how to find it (read only for a connect link)


def call_function(principal: Principal, name: str, arguments: dict[str, Any],
                  on_progress: Progress | None = None, client_requests: ClientRequests | None = None,
                  *, base_url: BaseUrl = "", continuing: int | None = None, unflagged: bool = False) -> CallOutcome:
    """`continuing`: the audit row of the call this round continues (a 2026 upstream's questions answered, the round
    vouched for by the gateway's sealed requestState): counted when it began, so not throttled again.
    `unflagged`: this worker job has just read `after_flagged(principal)` as False (the gateway's fast path,
    fastcall._job, reads it first to step aside for a call that could be held): not read a second time."""
    with through_client(principal.client):
        outcome = _call_function(principal, name, arguments, on_progress, client_requests, base_url=base_url,
                                 continuing=continuing, unflagged=unflagged)
    _after(principal, outcome)
    oauth_usage.note_use(principal.token_id, principal.expires_at)
    return outcome


# --- after a flagged result -----------------------------------------------------------------------
# A gateway client's transcript is not Toolhub's to read (chat's guard reads its own: agents_app.runtime.loop), so
# a flagged result marks the caller (tenant, user, agent) in the shared cache: while the mark stands, the tenant's
# `approve_after_flagged_result` holds the next consequential (not READ_ONLY) call for a person even where its
# link would not. A consequential call run after a person approved it lifts the mark; so does FLAGGED_TTL_S.
FLAGGED_TTL_S = 3600
AFTER_FLAGGED = ("held because an earlier result of this session carried text aimed at the model (the screen "
                 "flagged it); a person confirms this call was asked for")


def _flag_key(principal: Principal) -> str:
    return f"toolhub:gw-flagged:{principal.tenant.pk}:{principal.user.pk}:{principal.agent.pk}"


def _guard_on(principal: Principal) -> bool:
    """The tenant's setting, read from the row (the principal's tenant may be a remembered copy)."""
    return bool(Tenant.objects.filter(pk=principal.tenant.pk).values_list("approve_after_flagged_result",
                                                                          flat=True).first())


def after_flagged(principal: Principal) -> bool:
    """A flagged result was answered to this caller and no consequential call has been approved since."""
    return bool(cache.get(_flag_key(principal))) and _guard_on(principal)


def _flagged(result: ToolResult) -> bool:
    return bool((result.meta.get(META_KEY) or {}).get("flagged"))


def _after(principal: Principal, outcome: CallOutcome) -> None:
    """Mark the caller after a flagged result; lift the mark once a consequential call ran with an approval."""
    if outcome.held or outcome.result.error_code == codes.APPROVAL_REQUIRED:
        return
    ran_approved = outcome.approval_id is not None and outcome.function is not None and \
        not outcome.function.read_only
    if _flagged(outcome.result):
        if _guard_on(principal):
            cache.set(_flag_key(principal), 1, FLAGGED_TTL_S)
    elif ran_approved:
        cache.delete(_flag_key(principal))


def _call_function(principal: Principal, name: str, arguments: dict[str, Any],
                   on_progress: Progress | None, client_requests: ClientRequests | None,
                   *, base_url: BaseUrl, continuing: int | None = None, unflagged: bool = False) -> CallOutcome:
    """Call one function by its qualified name, through the same service as `/tools/{id}/invoke/`.

    A call that needs approval is held (tools_app.services.approvals); approving it runs it once. When
    the same user calls the same function with the same arguments through this agent after that, the
    run's result is answered (once) instead of a second run or a second request. Every call counts against
    the user's invoke throttle, as `/tools/{id}/invoke/` does (Refusal `throttled` once it is spent).
    """
    if continuing is None:
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
    guarded = not target.needs_approval and not fn.read_only and not unflagged and after_flagged(principal)
    if target.needs_approval or guarded:
        delivered = _collect_approved(principal, fn, arguments)
        if delivered is not None:
            return delivered
        pending = _pending_same(principal, fn, arguments)
        if pending is not None:
            return pending
        held = _hold(principal, fn, arguments, summary=AFTER_FLAGGED if guarded else "")
        if held is not None:
            return held
    done = tool_invoke(tenant=principal.tenant, actor=principal.user, tool_id=target.tool_id,
                       function=target.function, arguments=arguments, agent=principal.agent, via=VIA,
                       on_progress=_scrubbed_progress(on_progress, secrets_of(principal, fn)),
                       client_requests=client_requests, continuing=continuing)
    _connect_link(principal, target.tool_id, done.result, base_url)
    return CallOutcome(done.result, call_id=done.call.pk, function=fn, arguments=arguments,
                       approval_id=done.approval.pk if done.approval is not None else None)


def _connect_link(principal: Principal, tool_id: int, result: ToolResult, base_url: BaseUrl) -> None:
    """Where the caller connects: an `authorization_required` result gets the caller's own connect link when they
    may connect it (the shared connection: owners and admins), `credentials_required` the member's connections
    page. The base URL is built only then (`base_url` may be a callable)."""
    if result.error_code not in (codes.AUTHORIZATION_REQUIRED, codes.CREDENTIALS_REQUIRED):
        return
    base = base_url() if callable(base_url) else base_url
    if not base:
        return
    if result.error_code == codes.AUTHORIZATION_REQUIRED:
        link = oauth_flow.authorize_link_or_none(tenant=principal.tenant, actor=principal.user,
                                                 tool_id=tool_id, base_url=base)
        if link:
            result.meta[AUTHORIZE_URL] = link
    else:
        result.meta[CONNECTIONS_URL] = paths.home_url(base, principal.tenant.slug)


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


def _hold(principal: Principal, fn: GatewayFunction, arguments: dict[str, Any], *, summary: str = ""
          ) -> CallOutcome | None:
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
                                via=ApprovalVia.GATEWAY, summary=summary)
    return CallOutcome(ToolResult.fail(codes.APPROVAL_REQUIRED, approval.tool_call.error),
                       call_id=approval.tool_call_id, approval_id=approval.pk, function=fn, arguments=arguments)


def held_outcome(principal: Principal, name: str, arguments: dict[str, Any], approval_id: int) -> CallOutcome | None:
    """The pending request a 2026-07-28 client's retried call names in its requestState, while it is still this
    caller's undecided request for this very call; None otherwise (decided elsewhere, expired, another call)."""
    fn = listing(principal).by_name.get(name)
    if fn is None:
        return None
    shown = redacted_arguments(principal, fn, arguments)
    approval = (_same_call(principal, fn, ApprovalStatus.PENDING).filter(pk=approval_id, expires_at__gt=timezone.now())
                .first())
    if approval is None or approval.tool_call.arguments != shown:
        return None
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
    # The run's screen markers (its audit row keeps them) travel with it as with a result answered at once.
    meta: dict[str, Any] = {HANDED_OVER: True}
    if run.result_flags:
        flag = {META_KEY: {"flagged": True, "markers": list(run.result_flags)}}
        meta.update(flag, **{RESULT_META: flag})
    return ToolResult.ok(data=data if isinstance(data, dict) else None, text=run.result_excerpt,
                         content=content or None, **meta)


def decided_in_toolhub_only(principal: Principal) -> bool:
    """The tenant's policy that approvals asked through the gateway are decided only in Toolhub (read from the
    row: the principal's tenant may be a remembered copy)."""
    return bool(Tenant.objects.filter(pk=principal.tenant.pk).values_list("gateway_approvals_in_toolhub_only",
                                                                          flat=True).first())


def decide_and_run(principal: Principal, outcome: CallOutcome, *, approve: bool) -> CallOutcome | None:
    """The person at the client answered the elicitation: record the decision; approving runs the call once.

    None, deciding nothing, when the tenant has since ruled that gateway approvals are decided only in Toolhub.
    """
    with through_client(principal.client):
        decided = _decide_and_run(principal, outcome, approve=approve)
    if decided is not None:
        _after(principal, decided)
    return decided


def _decide_and_run(principal: Principal, outcome: CallOutcome, *, approve: bool) -> CallOutcome | None:
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


class Refusal(DomainError):
    """A typed refusal of a gateway request: the house's DomainError, its code chosen per refusal (throttled,
    permission_denied, approval_required, upstream_error). The server answers it as a JSON-RPC error whose data
    carries `code` and the details, as the API's error body does."""

    def __init__(self, code: ApiCode, message: str, **details: Any) -> None:
        super().__init__(message, details=details)
        self.code = code


def throttle(principal: Principal) -> None:
    """Count one call against the user's invoke throttle (the API's key and rate); Refusal when it is spent."""
    wait = take_throttle("invoke", principal.user)
    if wait is not None:
        seconds = max(1, int(wait))
        routing.note_spent(principal.user.pk, wait)  # its next 2026 calls are refused from their headers
        raise Refusal(ApiCode.THROTTLED, f"too many calls: the invoke rate of this token is spent; retry in {seconds} s",
                      retry_after_s=seconds)


def _scrubbed_progress(on_progress: Progress | None, secrets: list[str]) -> Progress | None:
    """The server's progress, forwarded to the gateway client with the tool's secrets masked in its messages."""
    if on_progress is None:
        return None

    def report(progress: float, total: float | None, message: str | None) -> None:
        on_progress(progress, total, scrub_text(message, secrets) if message and secrets else message)

    return report
