"""Approval batches: identical guarded calls of one turn share one decision, keyed so it cannot be replayed.

Which calls need approval and what warning they carry is decided by tools_app.runtime.approval_policy.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from tools_app.runtime.schemas import canonical_json


@dataclass
class ApprovalRequest:
    """Identical calls (same function, same canonical arguments) of one turn, awaiting one decision."""

    key: str
    name: str
    tool: str
    function: str
    arguments: dict[str, Any]
    safety: str
    warning: str | None
    call_ids: list[str] = field(default_factory=list)
    summary: str = ""  # what the approval card shows (the tool's before_approval), "" for the call itself

    def as_event(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "name": self.name,
            "tool": self.tool,
            "function": self.function,
            "arguments": self.arguments,
            "safety": self.safety,
            "warning": self.warning,
            "summary": self.summary or None,
            "count": len(self.call_ids),
            "call_ids": list(self.call_ids),
        }


def approval_key(turn_index: int, name: str, arguments: dict[str, Any], call_ids: list[str]) -> str:
    """Stable id of one approval batch.

    It covers the transcript position of the assistant turn (which the model cannot choose) and the
    call ids, so a decision given for one batch can never match a later call, even a verbatim repeat.
    """
    seed = json.dumps([turn_index, name, canonical_json(arguments), sorted(call_ids)])
    return hashlib.sha256(seed.encode()).hexdigest()[:32]
