"""After a chat run (ended, paused or cut off): the transcript made valid and stored, the conversation's status."""

from __future__ import annotations

from django.conf import settings
from django.db import transaction

from agents_app.chat.state import INTERRUPTED, RunState
from agents_app.models import Conversation, ConversationStatus, Message
from agents_app.runtime.loop import Event, render_result
from agents_app.runtime.transcript import content_text, pending_calls


def persist(run: RunState, outcome: Event | None) -> None:
    """Make the transcript valid and store it, whether the run ended, paused or was cut off."""
    awaiting, connecting = _answer_open_calls(run, outcome)
    messages, scrub = run.messages, run.scrub
    rows = [
        Message(
            conversation=run.conversation,
            role=str(m.get("role") or ""),
            content=scrub.text(content_text(m.get("content"))),
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


def _answer_open_calls(run: RunState, outcome: Event | None) -> tuple[bool, bool]:
    """Answer every open call in the transcript but those that wait (for an approval, or for their user to connect);
    returns (awaiting an approval, awaiting a connection)."""
    held = {cid for batch in run.approvals.values() for cid in batch["call_ids"]}
    paused = outcome is not None and outcome[0] == "done" and outcome[1].get("status") == "paused"
    waiting = {str(w.get("call_id")) for w in (outcome[1].get("waiting") or [])} if paused and outcome else set()
    awaiting = connecting = False
    for call in pending_calls(run.messages):
        if call.call_id in waiting:
            # Runs again on resume, once its user has connected or set their keys; a call approved before it
            # waited keeps its approval (the batch stays live) and is not asked for again.
            connecting = True
            continue
        if call.call_id in held and (paused or outcome is None):
            awaiting = True
            continue
        done = run.results.get(call.call_id)
        content = render_result(done, settings.TOOLHUB_TOOL_RESULT_CHARS) if done else f"Error: not executed: {INTERRUPTED}"
        run.messages.append({"role": "tool", "tool_call_id": call.call_id, "content": content})
    return awaiting, connecting
