"""A chat run as an iterator of events: the entry points that start or resume one, and the run itself."""

from __future__ import annotations

from collections.abc import Generator, Iterator
from typing import Any

from django.conf import settings

from agents_app.chat import events, hooks
from agents_app.chat.persist import persist
from agents_app.chat.prepare import expire_due, prepare_chat, prepare_resume
from agents_app.chat.state import RunState
from agents_app.runtime import loop
from agents_app.runtime.loop import Event
from core.codes import ApiCode
from core.db import release_connection
from core.links import public_base
from core.secrets import StreamScrubber
from tenants_app.models import Tenant
from tools_app.wiring.http import guarded_http_client


class ChatRun:
    """An iterator of events; `close()` (also on a client disconnect) persists what happened."""

    def __init__(self, run: RunState) -> None:
        self.conversation_id: int = run.conversation.pk
        self.state = run
        self._entered = False
        self._finished = False
        self._events: Generator[Event, None, None] = self._generate()

    def __iter__(self) -> ChatRun:
        return self

    @property
    def interactive(self) -> bool:
        return self.state.interactive

    @interactive.setter
    def interactive(self, value: bool) -> None:
        """Set by the view for a streamed response: a person sees the events as they come and can answer."""
        self.state.interactive = value

    def __next__(self) -> Event:
        return next(self._events)

    def close(self) -> None:
        self._events.close()
        if not self._entered and not self._finished:
            self._finish(None)  # never started: release the conversation

    def _generate(self) -> Generator[Event, None, None]:
        self._entered = True
        run = self.state
        outcome: Event | None = None
        stream: Iterator[Event] | None = None
        try:
            blocked = hooks.model_blocked(run)
            if blocked is not None:
                outcome = "error", {"code": ApiCode.MODEL_BLOCKED, "message": blocked, "steps": 0,
                                    "conversation_id": self.conversation_id}
                yield outcome
                return
            yield from run.preamble
            stream = loop.run(
                model=run.model,
                messages=run.messages,
                toolset=run.toolset,
                execute=hooks.executor(run),
                max_steps=run.agent.max_steps,
                result_char_cap=settings.TOOLHUB_TOOL_RESULT_CHARS,
                decisions=run.decisions,
                # A tenant's endpoint goes through the outbound guard on every request; the demo model doesn't.
                http_client=guarded_http_client() if run.guard_model_url else None,
                screen=hooks.screen(run),
                system=hooks.system(run),
                guard_after_flagged=run.tenant.approve_after_flagged_result,
            )
            scrub = run.scrub
            # A model may echo its key (or a tool secret) split across deltas: hold back what may start one.
            text = StreamScrubber(scrub)
            for name, data in _without_connection(stream):
                if name == "message.delta":
                    shown = text.feed(str(data.get("text") or ""))
                    if shown:
                        yield name, {**data, "text": shown}
                    continue
                rest = text.flush()
                if rest:
                    yield "message.delta", {"text": rest}
                data = events.shaped(run, name, scrub.value(data))
                if name in ("done", "error"):
                    data = {**data, "conversation_id": self.conversation_id}
                    outcome = name, data
                yield name, data
                follow_up = events.waiting(run, name, data)
                if follow_up is not None:
                    yield follow_up
        finally:
            if stream is not None:
                stream.close()  # type: ignore[attr-defined]  # loop.run is a generator
            self._finish(outcome)

    def _finish(self, outcome: Event | None) -> None:
        if self._finished:
            return
        self._finished = True
        persist(self.state, outcome)


def _without_connection(stream: Iterator[Event]) -> Iterator[Event]:
    """The loop's events, this thread's database connection given back before each is awaited: the loop waits
    on the model's answer and on tool calls (run by worker threads, each with a connection of its own while it
    needs one), and what the caller does with an event takes a connection again only when it queries."""
    while True:
        release_connection()
        try:
            item = next(stream)
        except StopIteration:
            return
        yield item


def chat_start(*, tenant: Tenant, actor: Any, agent_id: Any, message: str, conversation_id: Any = None,
               base_url: str = "") -> ChatRun:
    """Add the user's message to a new or existing conversation and return the run's event stream. `base_url`:
    Toolhub's public origin for links the run hands out (default TOOLHUB_PUBLIC_URL)."""
    run = prepare_chat(tenant=tenant, actor=actor, agent_id=agent_id, message=message,
                       conversation_id=conversation_id)
    run.base_url = base_url or public_base()
    return ChatRun(run)


def conversation_resume(*, tenant: Tenant, actor: Any, conversation_id: Any, base_url: str = "") -> ChatRun:
    """Continue a paused run with the decisions of its Approval rows (denied calls are reported refused)."""
    expire_due(tenant=tenant, actor=actor, conversation_id=conversation_id)
    run = prepare_resume(tenant=tenant, actor=actor, conversation_id=conversation_id)
    run.base_url = base_url or public_base()
    return ChatRun(run)
