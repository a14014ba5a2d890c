"""A chat run's state: everything one run needs, loaded before any model or tool call and kept as it goes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agents_app.models import Agent, Conversation
from agents_app.runtime.loop import Event
from agents_app.runtime.model_client import ModelConfig
from agents_app.runtime.toolset import Toolset
from core.secrets import Scrubber, scrubber
from tenants_app.models import Tenant
from tools_app.models import Tool
from tools_app.runtime.result import ToolResult

# What a call cut off by the run's end (or by a dead process) is answered with in the transcript.
INTERRUPTED = "the run was interrupted before this call finished"


@dataclass
class RunState:
    """One run: loaded inside a short transaction (agents_app.chat.prepare), then filled in as the loop goes."""

    tenant: Tenant
    actor: Any
    agent: Agent
    conversation: Conversation
    model: ModelConfig
    guard_model_url: bool
    toolset: Toolset
    secrets: dict[int, list[str]]
    messages: list[dict[str, Any]]
    persisted: int  # messages[:persisted] already have Message rows (or are the system prompt)
    approvals: dict[str, dict[str, Any]] = field(default_factory=dict)  # key -> {"id", "call_ids"}
    approved_call_ids: frozenset[str] = frozenset()
    decisions: dict[str, str] = field(default_factory=dict)
    results: dict[str, ToolResult] = field(default_factory=dict)
    preamble: list[Event] = field(default_factory=list)  # e.g. intent.routed, sent before the loop's events
    tools: dict[int, Tool] = field(default_factory=dict)  # the toolset's tools, for their plugin hooks
    titles: dict[str, str] = field(default_factory=dict)  # call id -> how the call is named (call_title)
    arguments: dict[str, Any] = field(default_factory=dict)  # call id -> the arguments the model sent
    # The events reach a person while the run goes on (a streamed chat): only then can a server's question
    # (MCP elicitation) or sampling request be put to the user mid-call.
    interactive: bool = False
    # Toolhub's public origin for links handed out during the run (an OAuth tool's connect link).
    base_url: str = ""

    @property
    def scrub(self) -> Scrubber:
        """The chat's one scrubber: the model's key and every linked tool's secrets, for all that is shown or kept."""
        return scrubber([self.model.api_key, *(v for values in self.secrets.values() for v in values)])
