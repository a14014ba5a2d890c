"""The one tool registry: built-ins, record tools and entry-point plugins, looked up by management name.

Built-ins register at import of tools_app.runtime.builtins, which the host imports at start (tools_app.apps: the
registry imports no tool, so it stays below them); hosts register their own (record tools) with
`register`; installed packages add tools through the `toolhub.tools` entry-point group, read by
`discover()` (again on each `refresh`, so an uninstalled package's tools disappear at the next sync).
An entry point names a ToolPlugin subclass, or a callable returning an iterable of them.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Iterable
from dataclasses import replace
from importlib import metadata
from typing import Any

from pydantic import BaseModel

from tools_app.runtime.errors import RuntimeToolError
from tools_app.runtime.plugin import ToolContext, ToolPlugin, input_schema_of, parse_arguments
from tools_app.runtime.result import EXECUTION_ERROR, INVALID_PARAMS, NOT_FOUND, REFUSED, ToolResult
from tools_app.runtime.tool_spec import DuplicateTool, PluginError, ToolSpec

ENTRY_POINT_GROUP = "toolhub.tools"
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
log = logging.getLogger(__name__)

__all__ = [
    "ENTRY_POINT_GROUP",
    "DuplicateTool",
    "PluginError",
    "ToolSpec",
    "all_tools",
    "discover",
    "get_tool",
    "invoke_tool",
    "plugin_errors",
    "register",
]


HOOKS = ("provide_context", "call_title", "refusal", "before_approval")

_lock = threading.RLock()
_allowed: frozenset[str] | None = None  # None: every installed plugin
_static: dict[str, ToolSpec] = {}  # built-ins and host registrations: live for the process
_discovered: dict[str, ToolSpec] | None = None  # entry-point plugins: re-read on refresh
_errors: list[PluginError] = []


def spec_of(plugin: ToolPlugin | type[ToolPlugin], *, source: str) -> ToolSpec:
    """Check a plugin class and build its spec; TypeError naming what is wrong."""
    instance = plugin() if isinstance(plugin, type) else plugin
    cls = type(instance)
    if not isinstance(instance, ToolPlugin):
        raise TypeError(f"{cls.__name__} is not a ToolPlugin")
    name = instance.name
    if not NAME_RE.match(name or ""):
        raise TypeError(f"{cls.__name__}.name {name!r} must match {NAME_RE.pattern}")
    if not (instance.description or "").strip():
        raise TypeError(f"tool {name!r}: a description is required (the model reads it)")
    if cls.execute is ToolPlugin.execute:
        raise TypeError(f"tool {name!r}: {cls.__name__} does not implement execute(args, ctx)")
    model = instance.args_model
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        raise TypeError(f"tool {name!r}: args_model must be a pydantic model class")
    safety = instance.safety
    destructive, read_only = safety.value == "DESTRUCTIVE", safety.value == "READ_ONLY"
    return ToolSpec(
        name=name,
        function_name=instance.function_name or name,
        description=instance.description.strip(),
        safety=safety.value,
        requires_approval=destructive if instance.requires_approval is None else bool(instance.requires_approval),
        default_enabled=read_only if instance.default_enabled is None else bool(instance.default_enabled),
        input_schema=input_schema_of(model),
        plugin=instance,
        args_model=model,
        source=source,
        hooks=frozenset(h for h in HOOKS if getattr(cls, h) is not getattr(ToolPlugin, h)),
    )


def register(plugin: ToolPlugin | type[ToolPlugin], *, source: str = "host", replace_existing: bool = False) -> ToolSpec:
    """Add a tool for the life of the process (built-ins, a host's record tools). Returns its spec."""
    spec = spec_of(plugin, source=source)
    with _lock:
        taken = _static.get(spec.name)
        if taken is not None and not replace_existing:
            raise DuplicateTool(f"tool name {spec.name!r} is registered twice ({taken.source} and {source})")
        _static[spec.name] = spec
    return spec


def is_registered(name: str) -> bool:
    with _lock:
        return name in _static


def unregister(name: str) -> None:
    """Remove a host registration (tests, a host that turns a feature off)."""
    with _lock:
        _static.pop(name, None)


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def configure(allowed: Iterable[str] | None) -> None:
    """Which installed plugins to offer: distribution or entry-point names; None or `*` for all, [] for none."""
    global _allowed, _discovered
    wanted = None if allowed is None else frozenset(_norm(a) for a in allowed if a.strip())
    with _lock:
        _allowed = None if wanted is not None and "*" in wanted else wanted
        _discovered = None  # read again under the new rule


def discover(*, refresh: bool = False) -> dict[str, ToolSpec]:
    """The tools installed packages offer through `toolhub.tools`, read once per process (or again on refresh).

    A broken entry point is logged and recorded in `plugin_errors()`; it never stops the others, and a
    plugin can never replace a built-in or host tool of the same name.
    """
    global _discovered
    with _lock:
        if _discovered is not None and not refresh:
            return _discovered
        found: dict[str, ToolSpec] = {}
        errors: list[PluginError] = []
        for ep in sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: (e.name, e.value)):
            dist = getattr(ep.dist, "name", "") or "?"
            if _allowed is not None and not {_norm(dist), _norm(ep.name)} & _allowed:
                continue
            try:
                for plugin in _plugins_of(ep.load()):
                    spec = spec_of(plugin, source=f"plugin:{dist}")
                    if spec.name in _static or spec.name in found:
                        raise DuplicateTool(f"tool name {spec.name!r} is already taken")
                    found[spec.name] = spec
            except Exception as exc:  # noqa: BLE001 - a broken plugin is reported, not fatal
                errors.append(PluginError(f"{ep.name} = {ep.value}", dist, f"{type(exc).__name__}: {exc}"))
                log.warning("toolhub plugin %s from %s not loaded: %s", ep.value, dist, exc)
        _discovered, _errors[:] = found, errors
        return found


def _plugins_of(obj: Any) -> Iterable[ToolPlugin | type[ToolPlugin]]:
    if isinstance(obj, type) and issubclass(obj, ToolPlugin) or isinstance(obj, ToolPlugin):
        return [obj]
    if callable(obj):
        return list(obj())
    raise TypeError("an entry point must name a ToolPlugin subclass or a callable returning them")


def plugin_errors() -> list[PluginError]:
    return list(_errors)


def all_tools(*, refresh: bool = False) -> list[ToolSpec]:
    plugins = discover(refresh=refresh)
    with _lock:
        merged = {**plugins, **_static}
    return sorted(merged.values(), key=lambda s: s.name)


def get_tool(name: str) -> ToolSpec:
    with _lock:
        spec = _static.get(name)
    if spec is None:
        spec = discover().get(name)
    if spec is None:
        raise KeyError(f"no tool named {name!r} is registered")
    return spec


def call_title(spec: ToolSpec, arguments: Any, configured_name: str) -> str:
    """The plugin's title for one call, or the configured name; a failing hook falls back quietly."""
    if "call_title" not in spec.hooks:
        return configured_name
    try:
        args = parse_arguments(spec.name, spec.args_model, arguments if arguments is not None else {})
        title = spec.plugin.call_title(args, configured_name)
    except Exception:  # noqa: BLE001 - a plugin's title hook must not break a call
        return configured_name
    return str(title).strip()[:200] if title else configured_name


def invoke_tool(name: str, function: str, arguments: Any, ctx: ToolContext) -> ToolResult:
    """Run one call: refusal hook, strict arguments, execute. Never raises: every failure is a typed ToolResult."""
    started = time.monotonic()
    try:
        spec = get_tool(name)
    except KeyError as exc:
        return ToolResult.fail(NOT_FOUND, str(exc.args[0]))
    if function != spec.function_name:
        return ToolResult.fail(
            NOT_FOUND, f"tool {name!r} has no function {function!r}; it offers {spec.function_name!r}"
        )
    ctx = replace(ctx, logger=logging.getLogger(f"toolhub.tools.{spec.name}"))
    try:
        if spec.plugin.requires_user:
            ctx.require_user()
        reason = spec.plugin.refusal(ctx) if "refusal" in spec.hooks else None
        if reason:
            result = ToolResult.fail(REFUSED, str(reason), refused_by="refusal")
        else:
            args = parse_arguments(spec.name, spec.args_model, arguments if arguments is not None else {})
            result = spec.plugin.execute(args, ctx)
            if not isinstance(result, ToolResult):
                raise TypeError(f"execute returned {type(result).__name__}, not ToolResult")
    except RuntimeToolError as exc:
        result = ToolResult.fail(exc.result_code, exc.message, **({"details": exc.details} if exc.details else {}))
    except Exception as exc:  # a bug in a tool must not escape as a 500
        log.exception("tool %s failed", name)
        result = ToolResult.fail(EXECUTION_ERROR, f"{name} failed: {type(exc).__name__}")
    if not result.success and result.error_code == INVALID_PARAMS:
        result.meta.setdefault("accepted", sorted(spec.args_model.model_fields))
    result.cost_ms = int((time.monotonic() - started) * 1000)
    return result
