"""What the agent loop calls back into during a chat run: a tool call through invoke, the screen before a call is
held for a person, the system prompt before each model turn; and whether the model's endpoint may be reached."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from django.db import connections

from agents_app.chat.client_requests import client_requests_for
from agents_app.chat.prompt import system_message
from agents_app.chat.state import RunState
from agents_app.runtime import loop
from core import hotcache
from core.db import release_connection
from core.outbound import check_url
from tools_app.models import ApprovalVia
from tools_app.runtime.errors import OutboundBlocked
from tools_app.runtime.result import ToolResult
from tools_app.services import plugins
from tools_app.services.approvals import approval_record_result, approval_screen
from tools_app.services.invoke import tool_invoke
from tools_app.wiring.http import outbound_policy


def model_blocked(run: RunState) -> str | None:
    """Why the tenant's model endpoint may not be called (the outbound guard), or None."""
    if not run.guard_model_url:
        return None
    try:
        check_url(run.model.base_url, outbound_policy())
    except OutboundBlocked as exc:
        return f"the model endpoint is not reachable from Toolhub: {exc.message}"
    except OSError:
        return None  # resolution failures surface as model_unreachable from the client
    return None


def executor(run: RunState) -> loop.Execute:
    """A call the loop makes, run through tool_invoke (the audit, the approval record of a call let through)."""
    owner = threading.get_ident()

    def execute(fn: Any, arguments: dict[str, Any], call_id: str) -> ToolResult:
        try:
            # Each call reads the hot cache's generations once (one round trip: the tenant's and the identities'
            # together, both of which a call reads) and afresh: a change made while the turn runs holds on its next call.
            with hotcache.request_scope(hints=(hotcache.AUTH, hotcache.tenant_scope(run.tenant.pk))):
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


def screen(run: RunState) -> loop.Screen:
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


def system(run: RunState) -> Callable[[], str] | None:
    """The system message before each model call: the agent's prompt, then what its tools add now."""
    specs = [plugins.spec_for(t) for t in run.tools.values()]
    if not any(spec is not None and "provide_context" in spec.hooks for spec in specs):
        return None

    def system() -> str:
        context = plugins.provided_context(tenant=run.tenant, actor=run.actor, tools=run.tools.values())
        release_connection()  # the model is called next: its answer is not waited for holding a connection
        return str(run.scrub.text(system_message(run.agent, context)["content"]))

    return system
