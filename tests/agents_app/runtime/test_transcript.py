"""Transcript helpers: open calls, the step budget across a resume, closing abandoned calls."""

from __future__ import annotations

from typing import Any

from agents_app.runtime.transcript import close_pending, open_calls, pending_calls, steps_taken


def assistant(*ids: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": i, "type": "function", "function": {"name": "t__f", "arguments": "{}"}} for i in ids],
    }


def tool(call_id: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": "ok"}


def test_open_calls_are_the_unanswered_calls_of_the_last_assistant_turn() -> None:
    messages = [{"role": "user", "content": "x"}, assistant("a", "b", "c"), tool("b")]
    index, pending = open_calls(messages)
    assert index == 1 and [p.call_id for p in pending] == ["a", "c"]
    assert pending_calls([*messages, tool("a"), tool("c")]) == []
    assert pending_calls([*messages, {"role": "user", "content": "y"}]) == []


def test_steps_count_model_turns_since_the_last_user_message() -> None:
    messages = [
        {"role": "user", "content": "x"},
        assistant("a"),
        tool("a"),
        {"role": "assistant", "content": "done"},
        {"role": "user", "content": "again"},
        assistant("b"),
    ]
    assert steps_taken(messages) == 1
    assert steps_taken(messages[:4]) == 2


def test_close_pending_answers_every_open_call() -> None:
    messages = [{"role": "user", "content": "x"}, assistant("a", "b"), tool("a")]
    assert close_pending(messages, "approval expired") == 1
    assert messages[-1] == {"role": "tool", "tool_call_id": "b", "content": "Error: not executed: approval expired"}
    assert pending_calls(messages) == []
