"""What crosses between a web process and a runner: server specs, results, discoveries and typed errors as JSON."""

from __future__ import annotations

import dataclasses
import json
import threading
from collections import OrderedDict
from typing import Any

from core.errors import RuntimeToolError
from tools_app.runtime.mcp.discovery import Discovery, FunctionInfo
from tools_app.runtime.mcp.spec import LocalSpec, ServerSpec
from tools_app.runtime.result import ToolResult
from tools_app.runtime.sandbox import SandboxPolicy, ServerSandbox

# Specs turned into JSON recently, by the (frozen, hashable) spec itself: a warm call sends the same spec every time,
# and dataclasses.asdict walks and deep-copies all of it (the sandbox policy's paths included) on each.
_SPEC_JSON_MAX = 256
_spec_json: OrderedDict[ServerSpec, dict[str, Any]] = OrderedDict()
_spec_json_lock = threading.Lock()


def spec_to_json(spec: ServerSpec) -> dict[str, Any]:
    """A LOCAL server spec (env values included: the transport is authenticated and private). The answer is shared
    between calls with an equal spec: callers only send it, never change it."""
    assert isinstance(spec.target, LocalSpec), "only LOCAL servers run on runners"
    try:
        with _spec_json_lock:
            found = _spec_json.get(spec)
    except TypeError:  # a field holding a list (not built by the spec builders): not hashable, not kept
        return dataclasses.asdict(spec)
    if found is not None:
        return found
    made = dataclasses.asdict(spec)
    _keep(_spec_json, spec, made)
    return made


def _keep(cache: OrderedDict[Any, Any], key: Any, value: Any) -> None:
    """`value` kept under `key` as the most recent entry of `cache`, the oldest dropped past _SPEC_JSON_MAX."""
    with _spec_json_lock:
        cache[key] = value
        cache.move_to_end(key)
        while len(cache) > _SPEC_JSON_MAX:
            cache.popitem(last=False)


# Specs read recently (on a runner), by their key, with the JSON each was read from: a warm call's spec is the same
# JSON every time, and building the dataclasses again is most of the runner's own work before the call.
_spec_read: OrderedDict[tuple[Any, ...], tuple[dict[str, Any], ServerSpec]] = OrderedDict()


def spec_from_json(raw: dict[str, Any]) -> ServerSpec:
    """The spec `raw` describes; an equal JSON read before gives the spec built then (compared whole, not trusted by
    its key)."""
    key = (raw.get("tool_id"), raw.get("config_version"), raw.get("tenant_key"), raw.get("principal"))
    try:
        with _spec_json_lock:
            seen = _spec_read.get(key)
    except TypeError:  # not a spec a web process wrote: built (and refused) as it comes
        return _spec_built(raw)
    if seen is not None and seen[0] == raw:
        return seen[1]
    spec = _spec_built(raw)
    _keep(_spec_read, key, (raw, spec))
    return spec


def _spec_built(raw: dict[str, Any]) -> ServerSpec:
    target = dict(raw["target"])
    sandbox = target.get("sandbox")
    if sandbox is not None:
        fields: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in sandbox["policy"].items()}
        policy = SandboxPolicy(**fields)
        target["sandbox"] = ServerSandbox(**{**sandbox, "policy": policy})
    for name in ("args", "roots"):
        target[name] = tuple(target.get(name) or ())
    target["env"] = tuple(tuple(pair) for pair in target.get("env") or ())
    return ServerSpec(tool_id=raw["tool_id"], config_version=raw["config_version"], tenant_key=raw["tenant_key"],
                      target=LocalSpec(**target), principal=str(raw.get("principal") or ""))


_RESULT_FIELDS = tuple(f.name for f in dataclasses.fields(ToolResult))


def result_to_json(result: ToolResult) -> dict[str, Any]:
    """The result's fields, not copied (dataclasses.asdict deep-copied its content on every call, the largest share of
    the runner's own CPU per call). Encode it with `encoded`, which writes a dataclass nested in data, content or meta
    as asdict would."""
    return {name: getattr(result, name) for name in _RESULT_FIELDS}


def _nested(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def encoded(payload: Any) -> bytes:
    """`payload` as the runner's answers are written (as Starlette's JSONResponse renders), dataclasses as asdict."""
    return json.dumps(payload, ensure_ascii=False, allow_nan=False, separators=(",", ":"),
                      default=_nested).encode("utf-8")


def event_line(event: Any) -> bytes:
    """One newline-delimited JSON event of a streamed answer (ASCII: no character a line splitter could cut at)."""
    return (json.dumps(event, default=_nested) + "\n").encode()


def result_from_json(raw: dict[str, Any]) -> ToolResult:
    return ToolResult(**raw)


def discovery_to_json(found: Discovery) -> dict[str, Any]:
    return dataclasses.asdict(found)


def discovery_from_json(raw: dict[str, Any]) -> Discovery:
    functions = [FunctionInfo(**item) for item in raw.get("functions") or []]
    return Discovery(**{**raw, "functions": functions})


def error_to_json(exc: RuntimeToolError) -> dict[str, Any]:
    return {"type": type(exc).__name__, "message": exc.message, "details": exc.details}


def error_from_json(raw: dict[str, Any]) -> RuntimeToolError:
    """The same typed runtime error the runner raised (its class found by name), else the base class."""
    cls = _error_classes().get(str(raw.get("type")), RuntimeToolError)
    return cls(str(raw.get("message") or "runner error"), details=dict(raw.get("details") or {}))


def _error_classes() -> dict[str, type[RuntimeToolError]]:
    found: dict[str, type[RuntimeToolError]] = {}
    pending: list[type[RuntimeToolError]] = [RuntimeToolError]
    while pending:
        cls = pending.pop()
        found.setdefault(cls.__name__, cls)
        pending.extend(cls.__subclasses__())
    return found
