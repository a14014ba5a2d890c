"""Toolset assembly: which functions an agent run may offer the model, under which unique names."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from tools_app.runtime import approval_policy

FunctionState = Literal["ACTIVE", "CHANGED", "REMOVED"]
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

    def __post_init__(self) -> None:
        self._by_name.update({f.qualified_name: f for f in self.functions})

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


def qualify(tool_name: str, function: str) -> str:
    """`<tool>__<function>` with characters OpenAI rejects replaced; long names keep a hash suffix."""
    name = _BAD_CHARS.sub("_", f"{tool_name}{SEPARATOR}{function}")
    if len(name) > MAX_NAME:
        name = _with_suffix(name, f"{tool_name}/{function}")
    return name


def _with_suffix(name: str, seed: str) -> str:
    digest = hashlib.sha256(seed.encode()).hexdigest()[:8]
    return f"{name[: MAX_NAME - len(digest) - 1]}_{digest}"


def _usable(c: FunctionCandidate, tenant_id: int, now: datetime) -> bool:
    return (
        c.tenant_id == tenant_id
        and c.tool_status == "ENABLED"
        and (c.tool_disabled_until is None or c.tool_disabled_until <= now)
        and c.state == "ACTIVE"
        and c.enabled
    )


def assemble(
    *,
    tenant_id: int,
    candidates: Iterable[FunctionCandidate],
    links: Iterable[AgentLink] | None = None,
    tool_names: Iterable[str] | None = None,
    usable_tool_ids: set[int] | None = None,
    now: datetime,
) -> Toolset:
    """Build a toolset from an agent's links, from management tool names, or (neither) every usable tool.

    Candidates of another tenant, disabled or backed-off tools, CHANGED/REMOVED/disabled functions,
    tools outside `usable_tool_ids` (the user's `use_tool` permission, when given), functions outside
    a link's `allowed_functions` and duplicates are all dropped.
    """
    if links is not None and tool_names is not None:
        raise ValueError("assemble() takes links or tool_names, not both")
    link_by_tool: dict[int, AgentLink] | None = None
    if links is not None:
        link_by_tool = {}
        for agent_link in links:
            link_by_tool.setdefault(agent_link.tool_id, agent_link)  # first link wins; AgentTool is unique per tool
    wanted_names = None if tool_names is None else frozenset(tool_names)

    seen: set[tuple[int, str]] = set()
    kept: list[tuple[FunctionCandidate, AgentLink | None]] = []
    for c in candidates:
        if not _usable(c, tenant_id, now):
            continue
        if usable_tool_ids is not None and c.tool_id not in usable_tool_ids:
            continue
        if wanted_names is not None and c.tool_name not in wanted_names:
            continue
        link: AgentLink | None = None
        if link_by_tool is not None:
            link = link_by_tool.get(c.tool_id)
            if link is None:
                continue
            if link.allowed_functions is not None and c.function not in link.allowed_functions:
                continue
        if (c.tool_id, c.function) in seen:
            continue
        seen.add((c.tool_id, c.function))
        kept.append((c, link))

    # Built-ins claim their names first, then older tools: a later server whose names collide
    # (e.g. tool "a" + function "b__c" vs tool "a__b" + function "c") gets a suffixed name
    # instead of shadowing one that already exists.
    kept.sort(key=lambda item: (item[0].tool_type != "BUILTIN", item[0].tool_id, item[0].function))
    taken: set[str] = set()
    functions: list[ToolsetFunction] = []
    for c, c_link in kept:
        name = qualify(c.tool_name, c.function)
        if name in taken:
            name = _with_suffix(name, f"{c.tool_id}/{c.function}")
            attempt = 0
            while name in taken:  # practically unreachable; keeps uniqueness a guarantee, not a hope
                attempt += 1
                name = _with_suffix(name, f"{c.tool_id}/{c.function}/{attempt}")
        taken.add(name)
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
                parameters=c.input_schema or dict(EMPTY_SCHEMA),
                safety=c.safety,
                needs_approval=needs_approval,
            )
        )
    return Toolset(tuple(functions))
