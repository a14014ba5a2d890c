"""The loop's events as the chat's client sees them: calls titled and their arguments redacted, a held batch
recorded as an Approval, paused calls described, a call refused inside the loop audited, and a call that waits for
its user followed by what they must do (connect the tool, or set their keys)."""

from __future__ import annotations

from typing import Any

from agents_app.chat.state import RunState
from agents_app.runtime.loop import Event
from core.codes import ResultCode
from core.db import release_connection
from core.secrets import redact
from tools_app import selectors as tool_selectors
from tools_app.connections import oauth_flow, paths
from tools_app.models import ApprovalVia, Tool
from tools_app.services import plugins
from tools_app.services.approvals import approval_request
from tools_app.services.invoke import REFUSED_CODES, call_refused

# A call that waits for its user: the event telling them what to do (the run pauses; resume runs it again).
WAITING_EVENTS: dict[str, str] = {ResultCode.AUTHORIZATION_REQUIRED: "authorization.required",
                                  ResultCode.CREDENTIALS_REQUIRED: "credentials.required"}


def shaped(run: RunState, name: str, data: dict[str, Any]) -> dict[str, Any]:
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


def waiting(run: RunState, name: str, data: dict[str, Any]) -> Event | None:
    """After a (shaped) `tool.result` whose call waits for its user: the event saying what they do first."""
    if name != "tool.result" or data.get("error_code") not in WAITING_EVENTS:
        return None
    needed = _connection_required(run, data)
    return None if needed is None else (WAITING_EVENTS[str(data["error_code"])], needed)


def _title(run: RunState, data: dict[str, Any]) -> str:
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


def _audit_refused(run: RunState, data: dict[str, Any]) -> None:
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


def _connection_required(run: RunState, data: dict[str, Any]) -> dict[str, Any] | None:
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
                "connections_url": paths.home_url(base, run.tenant.slug)}
    link = oauth_flow.authorize_link_or_none(tenant=run.tenant, actor=run.actor, tool_id=fn.tool_id,
                                             base_url=run.base_url) if run.base_url else None
    release_connection()
    return {**event, "authorize_url": link}


def _secrets_of(run: RunState, data: dict[str, Any]) -> list[str]:
    fn = run.toolset.get(str(data.get("name") or ""))
    return run.secrets.get(fn.tool_id, []) if fn is not None else []


def _redacted_call(run: RunState, data: dict[str, Any]) -> dict[str, Any]:
    arguments = data.get("arguments")
    if isinstance(arguments, dict):
        return {**data, "arguments": redact(arguments, _secrets_of(run, data))}
    return data


def _request_approval(run: RunState, data: dict[str, Any]) -> dict[str, Any]:
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


def _pending_out(run: RunState, data: dict[str, Any]) -> dict[str, Any]:
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
