"""What the one tool registry holds: a registered tool as the host sees it (ToolSpec), and the registry's errors.
A leaf: the registry, the built-ins and the services all name the same class."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from tools_app.runtime.plugin import ToolPlugin


class DuplicateTool(RuntimeError):
    """Two tools registered under one management name: a programming error, raised at registration."""


@dataclass(frozen=True)
class PluginError:
    """An entry point that could not be loaded (it is left out; the rest load)."""

    entry_point: str
    distribution: str
    error: str


@dataclass(frozen=True)
class ToolSpec:
    """One registered tool as the host sees it: its definition, where it came from, and the plugin."""

    name: str
    function_name: str
    description: str
    safety: str
    requires_approval: bool
    default_enabled: bool
    input_schema: dict[str, Any]
    plugin: ToolPlugin
    args_model: type[BaseModel]
    source: str = "builtin"  # "builtin", "host" or "plugin:<distribution>"
    hooks: frozenset[str] = field(default_factory=frozenset)

    @functools.cached_property
    def schema_digest(self) -> str:
        """The schema hash of its one function (tools_app.runtime.schemas.schema_hash), worked out once: every new
        tenant's built-in rows carry it (a spec is made at registration and never changed)."""
        from tools_app.runtime.schemas import schema_hash

        return schema_hash(name=self.function_name, description=self.description, input_schema=self.input_schema,
                           output_schema=None, annotations=None)

    @property
    def undone_by_rollback(self) -> bool:
        return bool(self.plugin.undone_by_rollback)

    @property
    def runs_outside_transaction(self) -> bool:
        return bool(self.plugin.runs_outside_transaction)

    @property
    def from_plugin(self) -> bool:
        return self.source.startswith("plugin:")
