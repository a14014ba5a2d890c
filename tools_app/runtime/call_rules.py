"""Whether a function can be called now, from its tool's, its own and the agent link's state: the one rule.

Django-free so toolset assembly (agents_app.runtime.toolset) and invoke's check (tools_app.policies.CallPolicy)
apply the very same rule; who the caller is (role, use_tool, use_agent) is the policy's other half.
Each refusal carries a typed `reason`, the ToolResult `code` a call answers with, and the message.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import datetime

from core.codes import REASON_FAMILY, Reason, ResultCode

ENABLED = "ENABLED"
ACTIVE = "ACTIVE"
CHANGED = "CHANGED"
REMOVED = "REMOVED"
HELD = "HELD"


@dataclass(frozen=True)
class Refusal:
    """Why a call may not happen: `reason` is the distinct cause, `code` the family a call result reports."""

    reason: Reason
    message: str

    @property
    def code(self) -> ResultCode:
        return REASON_FAMILY[self.reason]


def in_failure_window(disabled_until: datetime | None, now: datetime) -> bool:
    return disabled_until is not None and disabled_until > now


def tool_refusal(*, tool_name: str, status: str, disabled_until: datetime | None, now: datetime,
                 consecutive_failures: int = 0) -> Refusal | None:
    """The tool is disabled, or paused by its failure breaker."""
    if status != ENABLED:
        return Refusal(Reason.TOOL_DISABLED, f"tool {tool_name!r} is disabled")
    if disabled_until is not None and in_failure_window(disabled_until, now):
        return Refusal(
            Reason.TOOL_PAUSED,
            f"tool {tool_name!r} failed {consecutive_failures} times in a row and is paused until "
            f"{disabled_until:%Y-%m-%d %H:%M:%S} UTC",
        )
    return None


def function_refusal(*, tool_name: str, function: str, state: str | None, enabled: bool, unsupported_reason: str,
                     available: Callable[[], list[str]] = list) -> Refusal | None:
    """The function is missing or removed (`state` None: the tool has no such function), changed since it was
    approved, held by the screen, disabled by an admin, or one Toolhub cannot call. `available` names the active functions for
    the hint (asked only when the function is missing)."""
    if state is None or state == REMOVED:
        known = available()
        hint = "" if known else "; run Test or Refresh to discover the tool's functions"
        return Refusal(
            Reason.FUNCTION_MISSING,
            f"tool {tool_name!r} has no function {function!r}; available: {known}{hint}")
    if state == CHANGED:
        return Refusal(
            Reason.FUNCTION_CHANGED,
            f"function {function!r} changed since it was approved (new or different schema); "
            "an admin must approve it before use",
        )
    if state == HELD:
        return Refusal(
            Reason.FUNCTION_HELD,
            f"function {function!r} is held: the screen found instructions aimed at the model in its definition; "
            "an admin must review and approve it before use",
        )
    if not enabled:
        return Refusal(Reason.FUNCTION_DISABLED, f"function {function!r} of tool {tool_name!r} is disabled")
    if unsupported_reason:
        return Refusal(Reason.FUNCTION_UNSUPPORTED, f"function {function!r} cannot be called: {unsupported_reason}")
    return None


def link_refusal(*, agent_name: str, tool_name: str, function: str, linked: bool,
                 allowed_functions: Collection[str] | None) -> Refusal | None:
    """The agent has no link to the tool, or its link's `allowed_functions` (None: all) leave the function out."""
    if not linked:
        return Refusal(Reason.FUNCTION_NOT_ALLOWED, f"agent {agent_name!r} has no tool {tool_name!r}")
    if allowed_functions is not None and function not in allowed_functions:
        return Refusal(
            Reason.FUNCTION_NOT_ALLOWED,
            f"agent {agent_name!r} may not call {tool_name}.{function} (its link allows "
                       f"{sorted(allowed_functions)})")
    return None
