"""The one approval rule: which calls need a person's decision, and what warning they carry.

Django-free so the agent runtime (toolset assembly) and the tools services apply the very same rule;
tools_app.services.approvals wraps it for model instances.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

DESTRUCTIVE = "DESTRUCTIVE"
DESTRUCTIVE_WARNING = "This call is marked DESTRUCTIVE: it may delete or irreversibly change data."


def needs_approval(
    *,
    function_flag: bool | None,
    link_flag: bool | None,
    tool_flag: bool,
    safety: str,
    annotations: Mapping[str, Any] | None = None,
) -> bool:
    """True when the function, the agent's link or the tool asks for it, the tool is DESTRUCTIVE, or the
    server itself annotates the function as destructive.

    Flags only ever add a requirement: `requires_approval=False` on a function does not exempt it from a
    DESTRUCTIVE tool. The MCP `destructiveHint` counts only when the server states it explicitly (and does
    not also claim `readOnlyHint`): a hint can make a call stricter, never looser.
    """
    hinted = bool(
        isinstance(annotations, Mapping)
        and annotations.get("destructiveHint") is True
        and annotations.get("readOnlyHint") is not True
    )
    return bool(function_flag or link_flag or tool_flag or safety == DESTRUCTIVE or hinted)


def approval_warning(safety: str) -> str | None:
    """The warning a request shows its decider; DESTRUCTIVE calls always carry one."""
    return DESTRUCTIVE_WARNING if safety == DESTRUCTIVE else None
