"""Toolset assembly: which functions an agent run may offer the model, under which unique names."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from core.codes import Reason
from tools_app.runtime import approval_policy, call_rules
from tools_app.runtime.schemas import normalize_for_openai

FunctionState = Literal["ACTIVE", "CHANGED", "REMOVED", "HELD"]
Safety = Literal["READ_ONLY", "WRITE", "DESTRUCTIVE"]

# OpenAI's constraint on function names; other OpenAI-compatible servers accept the same set.
NAME_RE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_BAD_CHARS = re.compile(r"[^a-zA-Z0-9_-]")
SEPARATOR = "__"
MAX_NAME = 64
EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


@dataclass(frozen=True)
class FunctionCandidate:
    """One function of one tool as the database knows it, before any agent or user filter."""

    tool_id: int
    tool_name: str
    tool_type: str
    tool_status: str
    tool_disabled_until: datetime | None
    function: str
    description: str
    input_schema: dict[str, Any]
    state: FunctionState
    enabled: bool
    safety: Safety
    tool_requires_approval: bool
    function_requires_approval: bool | None
    tenant_id: int
    annotations: dict[str, Any] | None = None
    unsupported_reason: str = ""


@dataclass(frozen=True)
class AgentLink:
    """An AgentTool row: the tool attached to the agent, optionally narrowed to some functions."""

    tool_id: int
    allowed_functions: frozenset[str] | None = None
    requires_approval: bool | None = None


@dataclass(frozen=True)
class ToolsetFunction:
    """A function offered to the model; `qualified_name` is what the model sees and calls."""

    qualified_name: str
    tool_id: int
    tool_name: str
    function: str
    description: str
    parameters: dict[str, Any]
    safety: Safety
    needs_approval: bool

    def openai_tool(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.qualified_name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


@dataclass(frozen=True)
class Toolset:
    """The assembled functions of one run, addressable by qualified name only."""

    functions: tuple[ToolsetFunction, ...] = ()
    _by_name: dict[str, ToolsetFunction] = field(default_factory=dict, repr=False, compare=False)
    # Functions not offered to the model, each with why: [{"tool", "function", "reason"}].
    left_out: tuple[dict[str, str], ...] = ()

    def __post_init__(self) -> None:
        self._by_name.update({f.qualified_name: f for f in self.functions})

    def capped(self, limit: int) -> Toolset:
        """At most `limit` functions (in assembly order); the rest join `left_out` with the reason."""
        if limit < 0 or len(self.functions) <= limit:
            return self
        reason = f"over the model's limit of {limit} functions per request"
        dropped = [{"tool": f.tool_name, "function": f.function, "reason": reason} for f in self.functions[limit:]]
        return Toolset(self.functions[:limit], left_out=(*self.left_out, *dropped))

    def get(self, qualified_name: str) -> ToolsetFunction | None:
        return self._by_name.get(qualified_name)

    def names(self) -> list[str]:
        return [f.qualified_name for f in self.functions]

    def openai_tools(self) -> list[dict[str, Any]]:
        """The chat completions `tools` list."""
        return [f.openai_tool() for f in self.functions]

    def __iter__(self) -> Iterator[ToolsetFunction]:
        return iter(self.functions)

    def __len__(self) -> int:
        return len(self.functions)

    def __contains__(self, qualified_name: object) -> bool:
        return qualified_name in self._by_name


# A shortened tool part keeps at least this many of its own characters (plus a short hash).
MIN_TOOL_PART = 8


def _digest(seed: str, size: int = 6) -> str:
    return hashlib.sha256(seed.encode()).hexdigest()[:size]


def qualify(tool_name: str, function: str) -> str:
    """`<tool>__<function>` with characters OpenAI rejects replaced, at most 64 characters.

    Too long: the tool part is shortened first (prefix + hash of the full tool name), so the function
    stays readable; only a function too long on its own is cut too (prefix + hash). The toolset maps
    every name back to its (tool, function), so a shortened name never has to be parsed.
    """
    tool = _BAD_CHARS.sub("_", tool_name)
    fn = _BAD_CHARS.sub("_", function)
    name = f"{tool}{SEPARATOR}{fn}"
    if len(name) <= MAX_NAME:
        return name
    tool_budget = MAX_NAME - len(SEPARATOR) - len(fn)
    short_tool_len = MIN_TOOL_PART + 1 + 6
    if tool_budget >= short_tool_len:
        keep = tool_budget - 7
        return f"{tool[:keep]}_{_digest(tool_name)}{SEPARATOR}{fn}"
    short_tool = f"{tool[:MIN_TOOL_PART]}_{_digest(tool_name)}"
    fn_budget = MAX_NAME - len(short_tool) - len(SEPARATOR)
    short_fn = f"{fn[: fn_budget - 9]}_{_digest(tool_name + '/' + function, 8)}"
    return f"{short_tool}{SEPARATOR}{short_fn}"


def _with_suffix(name: str, seed: str) -> str:
    digest = hashlib.sha256(seed.encode()).hexdigest()[:8]
    return f"{name[: MAX_NAME - len(digest) - 1]}_{digest}"


def _refusal(c: FunctionCandidate, now: datetime) -> call_rules.Refusal | None:
    """The one call rule (tools_app.runtime.call_rules) on a candidate's tool and function state."""
    return call_rules.tool_refusal(tool_name=c.tool_name, status=c.tool_status, disabled_until=c.tool_disabled_until,
                                   now=now) or call_rules.function_refusal(
        tool_name=c.tool_name, function=c.function, state=c.state, enabled=c.enabled,
        unsupported_reason=c.unsupported_reason)


def _selected(candidates: Iterable[FunctionCandidate], *, tenant_id: int,
              link_by_tool: Mapping[int, AgentLink] | None, wanted_names: frozenset[str] | None,
              usable_tool_ids: set[int] | None, now: datetime,
              ) -> tuple[list[tuple[FunctionCandidate, AgentLink | None]], list[dict[str, str]]]:
    """The candidates the toolset keeps (with their agent link), and those left out because Toolhub cannot call
    them (listed with why); anything else refused, unlinked, unwanted or repeated is dropped."""
    seen: set[tuple[int, str]] = set()
    kept: list[tuple[FunctionCandidate, AgentLink | None]] = []
    left_out: list[dict[str, str]] = []
    for c in candidates:
        if c.tenant_id != tenant_id:
            continue
        refusal = _refusal(c, now)
        # A function Toolhub cannot call is still listed in `left_out` (with why); any other refusal drops it.
        if refusal is not None and refusal.reason != Reason.FUNCTION_UNSUPPORTED:
            continue
        if usable_tool_ids is not None and c.tool_id not in usable_tool_ids:
            continue
        if wanted_names is not None and c.tool_name not in wanted_names:
            continue
        link = link_by_tool.get(c.tool_id) if link_by_tool is not None else None
        if link_by_tool is not None and call_rules.link_refusal(
                agent_name="", tool_name=c.tool_name, function=c.function, linked=link is not None,
                allowed_functions=link.allowed_functions if link is not None else None):
            continue
        if (c.tool_id, c.function) in seen:
            continue
        seen.add((c.tool_id, c.function))
        if refusal is not None:
            left_out.append({"tool": c.tool_name, "function": c.function, "reason": c.unsupported_reason})
            continue
        kept.append((c, link))
    return kept, left_out


def _unique_name(c: FunctionCandidate, taken: set[str]) -> str:
    """`<tool>__<function>`, suffixed when an earlier function took that name; added to `taken`."""
    name = qualify(c.tool_name, c.function)
    if name in taken:
        name = _with_suffix(name, f"{c.tool_id}/{c.function}")
        attempt = 0
        while name in taken:  # practically unreachable; keeps uniqueness a guarantee, not a hope
            attempt += 1
            name = _with_suffix(name, f"{c.tool_id}/{c.function}/{attempt}")
    taken.add(name)
    return name


def assemble(
    *,
    tenant_id: int,
    candidates: Iterable[FunctionCandidate],
    links: Iterable[AgentLink] | None = None,
    tool_names: Iterable[str] | None = None,
    usable_tool_ids: set[int] | None = None,
    now: datetime,
    max_functions: int = -1,
) -> Toolset:
    """Build a toolset from an agent's links, from management tool names, or (neither) every usable tool.

    Candidates of another tenant, disabled or backed-off tools, CHANGED/REMOVED/disabled functions,
    tools outside `usable_tool_ids` (the user's `use_tool` permission, when given), functions outside
    a link's `allowed_functions` and duplicates are all dropped. Functions Toolhub cannot call
    (`unsupported_reason`, e.g. MCP tasks required) and those past `max_functions` (the model's limit on
    tools per request) are left out and listed in `left_out` with the reason.
    """
    if links is not None and tool_names is not None:
        raise ValueError("assemble() takes links or tool_names, not both")
    link_by_tool: dict[int, AgentLink] | None = None
    if links is not None:
        link_by_tool = {}
        for agent_link in links:
            link_by_tool.setdefault(agent_link.tool_id, agent_link)  # first link wins; AgentTool is unique per tool
    wanted_names = None if tool_names is None else frozenset(tool_names)
    kept, left_out = _selected(candidates, tenant_id=tenant_id, link_by_tool=link_by_tool, wanted_names=wanted_names,
                               usable_tool_ids=usable_tool_ids, now=now)

    # Built-ins claim their names first, then older tools: a later server whose names collide
    # (e.g. tool "a" + function "b__c" vs tool "a__b" + function "c") gets a suffixed name
    # instead of shadowing one that already exists.
    kept.sort(key=lambda item: (item[0].tool_type != "BUILTIN", item[0].tool_id, item[0].function))
    if max_functions >= 0 and len(kept) > max_functions:
        reason = f"over the model's limit of {max_functions} functions per request"
        left_out.extend({"tool": c.tool_name, "function": c.function, "reason": reason} for c, _ in kept[max_functions:])
        kept = kept[:max_functions]
    taken: set[str] = set()
    functions: list[ToolsetFunction] = []
    for c, c_link in kept:
        name = _unique_name(c, taken)
        needs_approval = approval_policy.needs_approval(
            function_flag=c.function_requires_approval,
            link_flag=c_link.requires_approval if c_link is not None else None,
            tool_flag=c.tool_requires_approval,
            safety=c.safety,
            annotations=c.annotations,
        )
        functions.append(
            ToolsetFunction(
                qualified_name=name,
                tool_id=c.tool_id,
                tool_name=c.tool_name,
                function=c.function,
                description=c.description or "",
                parameters=normalize_for_openai(c.input_schema),
                safety=c.safety,
                needs_approval=needs_approval,
            )
        )
    return Toolset(tuple(functions), left_out=tuple(left_out))
