"""Built-ins on the one tool registry: `@builtin` turns a typed function into a ToolPlugin and registers it."""

from __future__ import annotations

import typing
from collections.abc import Callable
from typing import Any

from tools_app.runtime import registry as _registry
from tools_app.runtime.builtins.context import DEFAULT_SQL_FUNCTIONS, BuiltinContext, SqlTarget
from tools_app.runtime.plugin import Safety, ToolArgs, ToolPlugin, input_schema_of
from tools_app.runtime.result import ToolResult
from tools_app.runtime.tool_spec import DuplicateTool, ToolSpec

__all__ = [
    "DEFAULT_SQL_FUNCTIONS",
    "BuiltinArgs",
    "BuiltinContext",
    "Safety",
    "SqlTarget",
    "all_builtins",
    "builtin",
    "get_builtin",
    "input_schema_of",
    "invoke_builtin",
]

BuiltinArgs = ToolArgs
BuiltinFunc = Callable[[Any, BuiltinContext], ToolResult]


def builtin(
    *,
    name: str,
    description: str,
    safety: Safety,
    function_name: str | None = None,
    requires_approval: bool | None = None,
    default_enabled: bool | None = None,
) -> Callable[[BuiltinFunc], BuiltinFunc]:
    """Register `func(args: <ToolArgs subclass>, ctx: BuiltinContext) -> ToolResult` as a built-in.

    DESTRUCTIVE built-ins require approval by default; anything not READ_ONLY starts disabled. Built-ins
    touch files, processes and their own SQL connection: none runs in, or is undone by, a database
    transaction, so a trial run refuses them.
    """

    def decorate(func: BuiltinFunc) -> BuiltinFunc:
        if _registry.is_registered(name):
            raise DuplicateTool(f"built-in name {name!r} is registered twice")
        try:
            model = next(iter(typing.get_type_hints(func).values()), None)
        except NameError:
            model = None
        if not (isinstance(model, type) and issubclass(model, ToolArgs)):
            raise TypeError(f"built-in {name!r}: first parameter must be annotated with a BuiltinArgs model")
        attrs = {
            "name": name, "description": description, "args_model": model, "safety": safety,
            "function_name": function_name, "requires_approval": requires_approval,
            "default_enabled": default_enabled, "runs_outside_transaction": True, "undone_by_rollback": False,
            "execute": lambda self, args, ctx: func(args, ctx), "__module__": func.__module__,
            "__doc__": func.__doc__,
        }
        plugin = type(f"Builtin_{name}", (ToolPlugin,), attrs)
        _registry.register(plugin, source="builtin")
        return func

    return decorate


def all_builtins() -> list[ToolSpec]:
    """The built-ins shipped with Toolhub (not host registrations or plugins)."""
    return [s for s in _registry.all_tools() if s.source == "builtin"]


def get_builtin(name: str) -> ToolSpec:
    return _registry.get_tool(name)


def invoke_builtin(name: str, function: str, arguments: Any, ctx: BuiltinContext) -> ToolResult:
    return _registry.invoke_tool(name, function, arguments, ctx)
