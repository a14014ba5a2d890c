"""The OpenAI-format transcript as the run's state: open calls, step count, repairs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class PendingCall:
    """A tool call of the transcript's last assistant message that has no `role: tool` answer yet."""

    call_id: str
    name: str
    arguments: str


def pending_calls(messages: list[dict[str, Any]]) -> list[PendingCall]:
    """Calls of the last assistant message still without a tool answer (what a resume will process)."""
    return open_calls(messages)[1]


def open_calls(messages: list[dict[str, Any]]) -> tuple[int, list[PendingCall]]:
    """(index of the last assistant message, its unanswered calls); (-1, []) when nothing is open."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.get("role") == "assistant":
            answered = {m.get("tool_call_id") for m in messages[index + 1 :] if m.get("role") == "tool"}
            return index, [
                PendingCall(
                    call_id=str(tc.get("id")),
                    name=str((tc.get("function") or {}).get("name", "")),
                    arguments=str((tc.get("function") or {}).get("arguments") or ""),
                )
                for tc in message.get("tool_calls") or []
                if tc.get("id") not in answered
            ]
        if message.get("role") != "tool":
            return -1, []
    return -1, []


def content_text(content: Any) -> str:
    """A message's text: its string content, or its text parts joined (image parts have none)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def last_question(messages: list[dict[str, Any]]) -> str:
    """The text of the last user message (what intent routing matches a turn by)."""
    return next((content_text(m.get("content")) for m in reversed(messages) if m.get("role") == "user"), "")


def steps_taken(messages: list[dict[str, Any]]) -> int:
    """Model turns since the last user message: a resume continues the same step budget."""
    count = 0
    for message in reversed(messages):
        role = message.get("role")
        if role == "user":
            break
        if role == "assistant":
            count += 1
    return count


def close_pending(messages: list[dict[str, Any]], reason: str) -> int:
    """Answer every unanswered call with `reason` (e.g. an expired approval) so the transcript is valid."""
    pending = pending_calls(messages)
    for call in pending:
        messages.append({"role": "tool", "tool_call_id": call.call_id, "content": f"Error: not executed: {reason}"})
    return len(pending)


def answer_orphans(messages: list[dict[str, Any]], reason: str = "the conversation moved on") -> int:
    """Answer unanswered calls that are followed by other messages (a pause abandoned for a new user
    message): OpenAI-compatible servers reject a transcript where a tool call has no answer.
    The open calls at the very end (a paused run) are left alone."""
    added = 0
    index = 0
    while index < len(messages):
        message = messages[index]
        index += 1
        if message.get("role") != "assistant" or not message.get("tool_calls"):
            continue
        end = index
        while end < len(messages) and messages[end].get("role") == "tool":
            end += 1
        if end == len(messages):
            continue  # the tail: pending, not orphaned
        answered = {m.get("tool_call_id") for m in messages[index:end]}
        missing = [
            {"role": "tool", "tool_call_id": tc.get("id"), "content": f"Error: not executed: {reason}"}
            for tc in message["tool_calls"]
            if tc.get("id") not in answered
        ]
        messages[end:end] = missing
        added += len(missing)
        index = end + len(missing)
    return added
