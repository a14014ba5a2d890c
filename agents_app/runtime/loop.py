"""The agent loop: model turns, concurrent tool calls, approval pauses and resumes, as a stream of events."""

from __future__ import annotations

import json
import queue
import threading
import time
import uuid
from collections.abc import Callable, Generator, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, Literal

import httpx2

from agents_app.runtime.approvals import ApprovalRequest, approval_key
from agents_app.runtime.model_client import IMAGES_KEY, ModelClient, ModelConfig, ModelError, ModelTurn
from agents_app.runtime.toolset import Toolset, ToolsetFunction
from agents_app.runtime.transcript import (
    answer_orphans,
    close_pending,
    open_calls,
    pending_calls,
    steps_taken,
)
from core import tracing
from core.codes import ApiCode, Reason, ResultCode
from tools_app.runtime.approval_policy import approval_warning
from tools_app.runtime.errors import InvalidParams
from tools_app.runtime.result import DENIED, EXECUTION_ERROR, INVALID_PARAMS, REFUSED, ToolResult
from tools_app.runtime.schemas import canonical_json, validate_arguments
from tools_app.runtime.screen import strip_invisible
from tools_app.runtime.screen.results import NOTICE_PREFIX, markers_of, notice

Event = tuple[str, dict[str, Any]]
Execute = Callable[[ToolsetFunction, dict[str, Any], str], ToolResult]
# Before a guarded call is held for a person: (a refusal, or None; what the approval card shows).
Screen = Callable[[ToolsetFunction, dict[str, Any]], tuple[str | None, str]]
Decision = Literal["approved", "denied"]

MAX_PARALLEL_CALLS = 8
DENIED_TEXT = f"Error ({DENIED}): this call was refused by a human reviewer. Do not retry it unless the user asks."

# The transcript helpers are part of the loop's public surface for the Django side.
__all__ = [
    "DENIED_TEXT",
    "ApprovalRequest",
    "Event",
    "Execute",
    "Screen",
    "answer_orphans",
    "close_pending",
    "pending_calls",
    "resume",
    "run",
    "steps_taken",
]


@dataclass
class _Call:
    """One call being processed: resolved, parsed and, once known, its outcome."""

    call_id: str
    name: str
    raw_arguments: str
    fn: ToolsetFunction | None = None
    arguments: dict[str, Any] | None = None
    status: str = ""  # ok | error | denied | awaiting_approval
    result: ToolResult | None = None
    content: str = ""

    def call_event(self) -> dict[str, Any]:
        return {
            "call_id": self.call_id,
            "name": self.name,
            "tool": self.fn.tool_name if self.fn else None,
            "function": self.fn.function if self.fn else None,
            "arguments": self.arguments if self.arguments is not None else self.raw_arguments,
            "safety": self.fn.safety if self.fn else None,
        }

    def result_event(self) -> dict[str, Any]:
        r = self.result
        shown = bool(r and r.shown and self.status == "ok")
        return {
            "shown": shown,
            # A result drawn for the reader carries its data whole, for the page to draw.
            **({"data": r.data} if shown and r is not None else {}),
            "call_id": self.call_id,
            "name": self.name,
            "tool": self.fn.tool_name if self.fn else None,
            "function": self.fn.function if self.fn else None,
            "status": self.status,
            "success": self.status == "ok",
            "error_code": DENIED if self.status == "denied" else (r.error_code if r else None),
            "error_reason": r.error_reason if r is not None and self.status != "denied" else None,
            "error": "refused by a human reviewer" if self.status == "denied" else (r.error if r else None),
            "content": self.content,
            "parts": display_parts(r.content) if r and self.status in ("ok", "error") else [],
            "cost_ms": r.cost_ms if r else 0,
            # The screen: markers of text aimed at the model in this result (invisible characters were stripped).
            "screen": {"flagged": bool(self.markers), "markers": self.markers},
        }

    @property
    def markers(self) -> list[str]:
        return markers_of(self.result) if self.result is not None and self.status == "ok" else []


# A call that answered one of these waits for its user (an account to connect, their own keys to set): it is left
# unanswered and the run pauses, so a resume once they have connected runs it again.
WAIT_CODES = frozenset({ResultCode.AUTHORIZATION_REQUIRED, ResultCode.CREDENTIALS_REQUIRED})

# Marks an event a running call posts (event_reporter), beside its progress reports.
EVENT_KEY = "__event__"

# Images larger than this (base64 characters) are shown as a placeholder, not streamed to the page.
MAX_DISPLAY_IMAGE_CHARS = 1_500_000
DISPLAY_IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")


def display_parts(content: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The non-text blocks a page can show: raster images (inline data) and links (uri, name)."""
    parts: list[dict[str, Any]] = []
    for block in content:
        kind = block.get("type")
        if kind == "image":
            mime = str(block.get("mimeType") or "")
            data = block.get("data")
            if mime in DISPLAY_IMAGE_TYPES and isinstance(data, str) and len(data) <= MAX_DISPLAY_IMAGE_CHARS:
                parts.append({"type": "image", "mimeType": mime, "data": data})
            else:
                parts.append({"type": "note", "text": f"[image: {mime or 'unknown type'} not shown]"})
        elif kind == "resource_link":
            parts.append({"type": "link", "uri": str(block.get("uri") or ""),
                          "name": str(block.get("title") or block.get("name") or block.get("uri") or "")})
        elif kind == "resource":
            resource = block.get("resource") or {}
            parts.append({"type": "link", "uri": str(resource.get("uri") or ""),
                          "name": str(resource.get("uri") or "")})
    return parts


# Images handed to a vision model: raster types only, each at most this many base64 characters (~3 MB),
# at most MAX_MODEL_IMAGES per tool answer.
MODEL_IMAGE_TYPES = DISPLAY_IMAGE_TYPES
MAX_MODEL_IMAGE_CHARS = 4_000_000
MAX_MODEL_IMAGES = 4
VISION_NOTE = "[the image(s) above follow as image parts you can view]"
NO_VISION_NOTE = "[image(s) not shown: this model does not accept images; only the description above is available]"


def model_images(result: ToolResult | None) -> list[dict[str, str]]:
    """The images of a result a vision model can be given (type and base64 data)."""
    images: list[dict[str, str]] = []
    for block in result.content if result is not None else []:
        data = block.get("data")
        if (block.get("type") == "image" and block.get("mimeType") in MODEL_IMAGE_TYPES and isinstance(data, str)
                and len(data) <= MAX_MODEL_IMAGE_CHARS and len(images) < MAX_MODEL_IMAGES):
            images.append({"mimeType": str(block["mimeType"]), "data": data})
    return images


def tool_message(call_id: str, content: str, result: ToolResult | None, vision: bool) -> dict[str, Any]:
    """The transcript's answer to one call: its text, and for a vision model the images to hand over."""
    message: dict[str, Any] = {"role": "tool", "tool_call_id": call_id, "content": content}
    if result is None or not any(b.get("type") == "image" for b in result.content):
        return message
    images = model_images(result) if vision else []
    if images:
        message["content"] = f"{content}\n{VISION_NOTE}"
        message[IMAGES_KEY] = images
    else:
        message["content"] = f"{content}\n{NO_VISION_NOTE}"
    return message


class _ProgressSink(threading.local):
    sink: Callable[[float, float | None, str | None], None] | None = None
    events: Callable[[str, dict[str, Any]], None] | None = None


_progress = _ProgressSink()


def progress_reporter() -> Callable[[float, float | None, str | None], None] | None:
    """Inside an `execute` call: where the tool's progress goes (a `tool.progress` event), else None."""
    return _progress.sink


def event_reporter() -> Callable[[str, dict[str, Any]], None] | None:
    """Inside an `execute` call: how to put an event of this call into the run's stream while the call runs
    (e.g. a server's question for the user); callable from any thread. None outside a call."""
    return _progress.events


def render_result(result: ToolResult, cap: int) -> str:
    """What the model reads for one result, capped with a visible notice (a result marked shown is kept whole)."""
    if result.success:
        if result.text:
            content = result.text
        elif result.data is not None:
            content = json.dumps(result.data, ensure_ascii=False, default=str)
        else:
            content = "(no output)"
    else:
        content = f"Error ({result.error_code}): {result.error or 'tool call failed'}"
    # Invisible characters (Unicode tags, zero-width, bidi controls) never reach a model, whatever path the
    # result took; a result carrying text aimed at the model says so after it.
    content = strip_invisible(content)[0]
    markers = markers_of(result) if result.success else []
    content = content if result.success and result.shown else truncate(content, cap)
    return f"{content}\n{notice(markers)}" if markers else content


def tainted(messages: list[dict[str, Any]]) -> bool:
    """A flagged result (the screen's notice) was read since the user's last message."""
    for message in reversed(messages):
        if message.get("role") == "user":
            return False
        if message.get("role") == "tool" and NOTICE_PREFIX in str(message.get("content") or ""):
            return True
    return False


def _guard_after_flagged(calls: list[_Call], messages: list[dict[str, Any]]) -> None:
    """After a flagged result, a WRITE or DESTRUCTIVE call needs a person's approval even where its link would not:
    what the result told the model may be what the model is now doing."""
    if not tainted(messages):
        return
    for call in calls:
        if call.fn is not None and call.result is None and call.fn.safety != "READ_ONLY" and not call.fn.needs_approval:
            call.fn = replace(call.fn, needs_approval=True)


def truncate(content: str, cap: int) -> str:
    if len(content) <= cap:
        return content
    return content[:cap] + f"\n[truncated: showing {cap} of {len(content)} characters]"


# --- the loop ----------------------------------------------------------------------------------


def run(
    *,
    model: ModelConfig,
    messages: list[dict[str, Any]],
    toolset: Toolset,
    execute: Execute,
    max_steps: int,
    result_char_cap: int = 8000,
    decisions: Mapping[str, str] | None = None,
    http_client: httpx2.Client | None = None,
    screen: Screen | None = None,
    system: Callable[[], str] | None = None,
    guard_after_flagged: bool = False,
) -> Iterator[Event]:
    """Run the agent until a final answer, a pause (an approval, or a call waiting for its user to connect an
    account or set their keys: WAIT_CODES), an error or the step limit.

    `messages` is the OpenAI-format transcript; it is extended in place (assistant turns, tool
    answers), so after the generator ends the caller persists it as is. If it ends with unanswered
    tool calls (a paused run), those are processed first using `decisions` ({approval key:
    "approved"|"denied"}); decisions apply only to the calls pending at this moment, so nothing the
    model or a tool says later can reuse them. `screen` sees each guarded call before it is held: it may
    refuse it (no one is asked) or give the approval card's text. `system`, when given, is asked for the
    system message before every model call (tools' provide_context). Never raises: failures are `error` events.
    """
    client: ModelClient | None = None
    steps = steps_taken(messages)
    try:
        answer_orphans(messages)
        turn_index, pending = open_calls(messages)
        if pending:
            approvals = yield from _process_calls(
                turn_index,
                [_Call(p.call_id, p.name, p.arguments) for p in pending],
                messages,
                toolset,
                execute,
                result_char_cap,
                decisions or {},
                model.vision,
                screen,
                guard_after_flagged,
            )
            waiting = _waiting(messages, approvals)
            if approvals or waiting:
                yield _paused(approvals, steps, waiting)
                return
        tools = toolset.openai_tools()
        while True:
            if steps >= max_steps:
                yield _max_steps(max_steps, steps, [])
                return
            if client is None:
                client = ModelClient(model, http_client=http_client)
            _refresh_system(messages, system)
            turn = yield from _model_turn(client, model, messages, tools, steps)
            if isinstance(turn, ModelError):
                yield "error", {"code": turn.code, "message": turn.message, "steps": steps}
                return
            steps += 1
            _unique_ids(turn)
            messages.append(turn.as_message())
            if not turn.tool_calls:
                yield "done", {"status": "completed", "message": turn.content, "steps": steps}
                return
            if steps >= max_steps:
                # The model would never see these results: answer them without running anything.
                messages.extend({"role": "tool", "tool_call_id": c.id,
                                 "content": f"Error: not executed: the step limit ({max_steps} model turns) was reached"}
                                for c in turn.tool_calls)
                yield _max_steps(max_steps, steps, [c.name for c in turn.tool_calls])
                return
            approvals = yield from _process_calls(
                len(messages) - 1,
                [_Call(c.id, c.name, c.arguments) for c in turn.tool_calls],
                messages,
                toolset,
                execute,
                result_char_cap,
                {},  # approvals never come from inside the run
                model.vision,
                screen,
                guard_after_flagged,
            )
            waiting = _waiting(messages, approvals)
            if approvals or waiting:
                yield _paused(approvals, steps, waiting)
                return
    except Exception as exc:  # noqa: BLE001 - the generator reports, it does not raise
        yield "error", {"code": ApiCode.AGENT_ERROR, "message": f"agent loop failed: {type(exc).__name__}", "steps": steps}
    finally:
        if client is not None:
            client.close()


def _model_turn(client: ModelClient, model: ModelConfig, messages: list[dict[str, Any]],
                tools: list[dict[str, Any]], steps: int) -> Generator[Event, None, ModelTurn | ModelError]:
    """One model call, traced, its text streamed as `message.delta`: the turn, or the model's error."""
    turn: ModelTurn | None = None
    with tracing.span(f"chat {model.model}", {"gen_ai.operation.name": "chat", "gen_ai.request.model": model.model,
                                              "toolhub.step": steps + 1}, kind="client", current=False) as current:
        try:
            for item in client.stream_turn(messages, tools):
                if isinstance(item, str):
                    yield "message.delta", {"text": item}
                else:
                    turn = item
        except ModelError as exc:
            tracing.set_attributes(current, **{"error.type": exc.code})
            return exc
        assert turn is not None
        tracing.set_attributes(current, **{"gen_ai.response.tool_calls": len(turn.tool_calls)})
    return turn


def resume(
    *,
    model: ModelConfig,
    messages: list[dict[str, Any]],
    toolset: Toolset,
    execute: Execute,
    max_steps: int,
    decisions: Mapping[str, str],
    result_char_cap: int = 8000,
    http_client: httpx2.Client | None = None,
    screen: Screen | None = None,
    system: Callable[[], str] | None = None,
    guard_after_flagged: bool = False,
) -> Iterator[Event]:
    """Continue a paused run: approved calls execute, denied ones are reported as refused."""
    return run(
        model=model,
        messages=messages,
        toolset=toolset,
        execute=execute,
        max_steps=max_steps,
        result_char_cap=result_char_cap,
        decisions=decisions,
        http_client=http_client,
        screen=screen,
        system=system,
    )


def _refresh_system(messages: list[dict[str, Any]], system: Callable[[], str] | None) -> None:
    if system is None or not messages or messages[0].get("role") != "system":
        return
    try:
        messages[0] = {**messages[0], "content": system()}
    except Exception:  # noqa: BLE001 - the prompt built before the run stays
        return


def _paused(approvals: list[ApprovalRequest], steps: int, waiting: list[dict[str, str]] | None = None) -> Event:
    done: dict[str, Any] = {
        "status": "paused",
        "message": "",
        "steps": steps,
        "pending": [a.as_event() for a in approvals],
    }
    if waiting:
        done["waiting"] = waiting  # calls that run again on resume once their user has connected
    return "done", done


def _waiting(messages: list[dict[str, Any]], approvals: list[ApprovalRequest]) -> list[dict[str, str]]:
    """The calls left open for their user (WAIT_CODES), not those held for an approval."""
    held = {cid for a in approvals for cid in a.call_ids}
    return [{"call_id": c.call_id, "name": c.name} for c in pending_calls(messages) if c.call_id not in held]


def _max_steps(max_steps: int, steps: int, wanted: list[str]) -> Event:
    message = f"stopped after {steps} model turns (max_steps={max_steps})"
    if wanted:
        message += f"; the model still wanted to call: {', '.join(wanted)}"
    return "error", {"code": ApiCode.MAX_STEPS_EXCEEDED, "message": message, "steps": steps}


def _unique_ids(turn: ModelTurn) -> None:
    seen: set[str] = set()
    for c in turn.tool_calls:
        if not c.id or c.id in seen:
            c.id = f"call_{uuid.uuid4().hex[:24]}"
        seen.add(c.id)


def _available(toolset: Toolset) -> str:
    names = toolset.names()
    shown = ", ".join(names[:40]) or "(none)"
    return shown + (f", ... ({len(names) - 40} more)" if len(names) > 40 else "")


def _prepare(call: _Call, toolset: Toolset) -> None:
    """Resolve the function and parse/validate arguments; failures become the call's result."""
    call.fn = toolset.get(call.name)
    if call.fn is None:
        call.result = ToolResult.refused(Reason.UNKNOWN_FUNCTION,
                                         f"unknown tool {call.name!r}; available: {_available(toolset)}")
        return
    raw = call.raw_arguments.strip()
    try:
        parsed = json.loads(raw) if raw else {}
    except json.JSONDecodeError as exc:
        call.result = ToolResult.fail(INVALID_PARAMS, f"arguments are not valid JSON ({exc.msg} at char {exc.pos})")
        return
    if not isinstance(parsed, dict):
        call.result = ToolResult.fail(INVALID_PARAMS, "arguments must be a JSON object")
        return
    call.arguments = parsed
    try:
        validate_arguments(call.fn.parameters, parsed)
    except InvalidParams as exc:
        call.result = ToolResult.fail(INVALID_PARAMS, exc.message)


def _safe_execute(execute: Execute, fn: ToolsetFunction, arguments: dict[str, Any], call_id: str) -> ToolResult:
    started = time.monotonic()
    try:
        result = execute(fn, arguments, call_id)
    except Exception as exc:  # noqa: BLE001 - a failing tool is a result, and its text may hold secrets
        result = ToolResult.fail(EXECUTION_ERROR, f"the tool failed ({type(exc).__name__})")
    if not isinstance(result, ToolResult):
        result = ToolResult.fail(EXECUTION_ERROR, "the tool returned no result")
    if not result.cost_ms:
        result.cost_ms = int((time.monotonic() - started) * 1000)
    return result


def _process_calls(
    turn_index: int,
    calls: list[_Call],
    messages: list[dict[str, Any]],
    toolset: Toolset,
    execute: Execute,
    cap: int,
    decisions: Mapping[str, str],
    vision: bool = False,
    screen: Screen | None = None,
    guard_after_flagged: bool = False,
) -> Generator[Event, None, list[ApprovalRequest]]:
    """Answer one turn's calls: errors at once, approved/unguarded ones concurrently, the rest held.

    Returns (as the generator's value) the approval batches still awaiting a decision.
    """
    for call in calls:
        _prepare(call, toolset)
    if guard_after_flagged:
        _guard_after_flagged(calls, messages)
    # A resumed batch was screened before it was held.
    cards = _screened(calls, screen) if screen is not None and not decisions else {}
    approvals = _held(turn_index, calls, decisions, cards)
    runnable = [c for c in calls if c.result is None and not c.status]
    yield from _announced(calls, cap)
    if runnable:
        yield from _run_concurrently(runnable, execute, cap)
    # Answers go in the assistant's call order, whatever order they finished in.
    for call in calls:
        waits = call.result is not None and call.result.error_code in WAIT_CODES
        if call.status != "awaiting_approval" and not waits:
            messages.append(tool_message(call.call_id, call.content, call.result, vision))
    for a in approvals:
        yield "approval.required", a.as_event()
    return approvals


def _screened(calls: list[_Call], screen: Screen) -> dict[str, str]:
    """A guarded call not yet decided may be refused before anyone is asked (its result set to REFUSED), or say
    what its card shows: the cards by call id."""
    cards: dict[str, str] = {}
    for call in calls:
        if call.result is None and call.fn is not None and call.fn.needs_approval and call.arguments is not None:
            try:
                refused, cards[call.call_id] = screen(call.fn, call.arguments)
            except Exception:  # noqa: BLE001 - a failing screen shows the plain card
                refused = None
            if refused:
                call.result = ToolResult.fail(REFUSED, refused)
    return cards


def _held(turn_index: int, calls: list[_Call], decisions: Mapping[str, str],
          cards: Mapping[str, str]) -> list[ApprovalRequest]:
    """Guarded calls batched by function + canonical arguments (the key covers the batch's call ids): approved
    batches run, denied ones are marked, the others are held and returned as approval requests."""
    groups: dict[tuple[str, str], list[_Call]] = {}
    for call in calls:
        if call.result is None and call.fn is not None and call.fn.needs_approval:
            groups.setdefault((call.name, canonical_json(call.arguments)), []).append(call)
    approvals: list[ApprovalRequest] = []
    for (name, _), members in groups.items():
        fn = members[0].fn
        assert fn is not None and members[0].arguments is not None
        ids = [m.call_id for m in members]
        key = approval_key(turn_index, name, members[0].arguments, ids)
        decision = decisions.get(key)
        if decision == "approved":
            continue
        for m in members:
            m.status = "denied" if decision == "denied" else "awaiting_approval"
        if decision != "denied":
            approvals.append(ApprovalRequest(
                key=key, name=name, tool=fn.tool_name, function=fn.function, arguments=members[0].arguments,
                safety=fn.safety, warning=approval_warning(fn.safety), call_ids=ids,
                summary=cards.get(members[0].call_id, ""),
            ))
    return approvals


def _announced(calls: list[_Call], cap: int) -> Iterator[Event]:
    """`tool.call` for every call not held, then the results known before running: errors and denials."""
    for call in calls:
        if call.status != "awaiting_approval":
            yield "tool.call", call.call_event()
    for call in calls:
        if call.result is not None:
            call.status = "error"
            call.content = render_result(call.result, cap)
            yield "tool.result", call.result_event()
        elif call.status == "denied":
            call.content = DENIED_TEXT
            yield "tool.result", call.result_event()


def _run_concurrently(runnable: list[_Call], execute: Execute, cap: int) -> Iterator[Event]:
    """Run the calls in a small thread pool; their progress, events and results stream as they come."""
    # Workers post progress, events and completion to one queue, so they stream while calls run.
    posted: queue.Queue[tuple[_Call, ToolResult | None, dict[str, Any] | None]] = queue.Queue()

    def work(call: _Call) -> None:
        assert call.fn is not None and call.arguments is not None

        def report(progress: float, total: float | None, message: str | None) -> None:
            posted.put((call, None, {"progress": progress, "total": total, "message": message}))

        def emit(name: str, data: dict[str, Any]) -> None:
            posted.put((call, None, {EVENT_KEY: name, **data}))

        _progress.sink, _progress.events = report, emit
        try:
            result = _safe_execute(execute, call.fn, call.arguments, call.call_id)
        finally:
            _progress.sink = _progress.events = None
        posted.put((call, result, None))

    with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL_CALLS, len(runnable))) as pool:
        for call in runnable:
            pool.submit(work, call)
        remaining = len(runnable)
        while remaining:
            call, result, progress = posted.get()
            if progress is not None:
                event = dict(progress)
                name = str(event.pop(EVENT_KEY)) if EVENT_KEY in event else "tool.progress"
                yield name, {"call_id": call.call_id, "name": call.name,
                             "tool": call.fn.tool_name if call.fn else None,
                             "function": call.fn.function if call.fn else None, **event}
                continue
            assert result is not None
            remaining -= 1
            call.result = result
            call.status = "ok" if call.result.success else "error"
            call.content = render_result(call.result, cap)
            yield "tool.result", call.result_event()
