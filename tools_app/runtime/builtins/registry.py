"""Built-in tool registry: a decorator over typed functions, strict pydantic arguments, one invoke()."""

from __future__ import annotations

import enum
import time
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from tools_app.runtime.builtins.context import DEFAULT_SQL_FUNCTIONS, BuiltinContext, SqlTarget
from tools_app.runtime.errors import RuntimeToolError
from tools_app.runtime.result import EXECUTION_ERROR, INVALID_PARAMS, NOT_FOUND, ToolResult

__all__ = [
    "DEFAULT_SQL_FUNCTIONS",
    "BuiltinArgs",
    "BuiltinContext",
    "BuiltinSpec",
    "DuplicateBuiltin",
    "Safety",
    "SqlTarget",
    "all_builtins",
    "builtin",
    "get_builtin",
    "invoke_builtin",
]


class Safety(enum.StrEnum):
    READ_ONLY = "READ_ONLY"
    WRITE = "WRITE"
    DESTRUCTIVE = "DESTRUCTIVE"


class BuiltinArgs(BaseModel):
    """Base of every argument model: closed (unknown keys refused) and strictly typed."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


BuiltinFunc = Callable[[Any, BuiltinContext], ToolResult]


@dataclass(frozen=True)
class BuiltinSpec:
    name: str
    function_name: str
    description: str
    safety: str
    requires_approval: bool
    default_enabled: bool
    input_schema: dict[str, Any]
    func: BuiltinFunc
    args_model: type[BuiltinArgs] = BuiltinArgs


class DuplicateBuiltin(RuntimeError):
    """Two built-ins registered under one management name: a programming error, raised at import."""


_REGISTRY: dict[str, BuiltinSpec] = {}


def builtin(
    *,
    name: str,
    description: str,
    safety: Safety,
    function_name: str | None = None,
    requires_approval: bool | None = None,
    default_enabled: bool | None = None,
) -> Callable[[BuiltinFunc], BuiltinFunc]:
    """Register `func(args: <BuiltinArgs subclass>, ctx: BuiltinContext) -> ToolResult` as a built-in.

    DESTRUCTIVE built-ins require approval by default; anything not READ_ONLY starts disabled.
    """

    def decorate(func: BuiltinFunc) -> BuiltinFunc:
        if name in _REGISTRY:
            raise DuplicateBuiltin(f"built-in name {name!r} is registered twice")
        try:
            model = next(iter(typing.get_type_hints(func).values()), None)
        except NameError:
            model = None
        if not (isinstance(model, type) and issubclass(model, BuiltinArgs)):
            raise TypeError(f"built-in {name!r}: first parameter must be annotated with a BuiltinArgs model")
        spec = BuiltinSpec(
            name=name,
            function_name=function_name or name,
            description=description,
            safety=safety.value,
            requires_approval=(safety is Safety.DESTRUCTIVE)
            if requires_approval is None
            else requires_approval,
            default_enabled=(safety is Safety.READ_ONLY) if default_enabled is None else default_enabled,
            input_schema=input_schema_of(model),
            func=func,
            args_model=model,
        )
        _REGISTRY[name] = spec
        return func

    return decorate


def input_schema_of(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON Schema, closed at every level (`additionalProperties: false`)."""
    schema = model.model_json_schema()
    schema.pop("title", None)
    _close(schema)
    for sub in schema.get("$defs", {}).values():
        _close(sub)
    return schema


def _close(schema: dict[str, Any]) -> None:
    if schema.get("type") == "object":
        schema["additionalProperties"] = False
        schema.setdefault("properties", {})


def all_builtins() -> list[BuiltinSpec]:
    _load()
    return sorted(_REGISTRY.values(), key=lambda s: s.name)


def get_builtin(name: str) -> BuiltinSpec:
    _load()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"no built-in named {name!r}") from None


def _load() -> None:
    # Importing the package imports every module in it, which registers each built-in once.
    import tools_app.runtime.builtins  # noqa: F401


def parse_arguments(spec: BuiltinSpec, arguments: Any) -> BuiltinArgs:
    """Validate strictly; raise InvalidParams naming unknown/missing/mistyped arguments."""
    from tools_app.runtime.errors import InvalidParams

    accepted = sorted(spec.args_model.model_fields)
    if not isinstance(arguments, dict):
        raise InvalidParams(f"arguments must be a JSON object; accepted: {', '.join(accepted) or '(none)'}")
    unknown = sorted(set(arguments) - set(accepted))
    if unknown:
        raise InvalidParams(
            f"unknown argument(s) {', '.join(map(repr, unknown))} for {spec.name}; "
            f"accepted: {', '.join(accepted) or '(none)'}",
            details={"unknown": unknown, "accepted": accepted},
        )
    try:
        return spec.args_model.model_validate(arguments)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            where = ".".join(str(p) for p in err["loc"]) or "(arguments)"
            got = type(err.get("input")).__name__ if err["type"] != "missing" else "nothing"
            problems.append(f"argument {where!r}: {err['msg']} (got {got})")
        raise InvalidParams(
            f"invalid arguments for {spec.name}: " + "; ".join(problems),
            details={"errors": problems, "accepted": accepted},
        ) from None


def invoke_builtin(name: str, function: str, arguments: dict[str, Any], ctx: BuiltinContext) -> ToolResult:
    """Run one built-in call. Never raises for bad input: every failure is a typed ToolResult."""
    started = time.monotonic()
    try:
        spec = get_builtin(name)
    except KeyError as exc:
        return ToolResult.fail(NOT_FOUND, str(exc.args[0]))
    if function != spec.function_name:
        return ToolResult.fail(
            NOT_FOUND, f"built-in {name!r} has no function {function!r}; it offers {spec.function_name!r}"
        )
    try:
        args = parse_arguments(spec, arguments if arguments is not None else {})
        result = spec.func(args, ctx)
    except RuntimeToolError as exc:
        result = ToolResult.fail(
            exc.result_code, exc.message, **({"details": exc.details} if exc.details else {})
        )
    except Exception as exc:  # a bug in a built-in must not escape as a 500
        result = ToolResult.fail(EXECUTION_ERROR, f"{name} failed: {type(exc).__name__}")
    if not result.success and result.error_code == INVALID_PARAMS:
        result.meta.setdefault("accepted", sorted(spec.args_model.model_fields))
    result.cost_ms = int((time.monotonic() - started) * 1000)
    return result
