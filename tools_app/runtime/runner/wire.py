"""What crosses between a web process and a runner: server specs, results, discoveries and typed errors as JSON."""

from __future__ import annotations

import dataclasses
from typing import Any

from core.errors import RuntimeToolError
from tools_app.runtime.mcp.discovery import Discovery, FunctionInfo
from tools_app.runtime.mcp.spec import LocalSpec, ServerSpec
from tools_app.runtime.result import ToolResult
from tools_app.runtime.sandbox import SandboxPolicy, ServerSandbox


def spec_to_json(spec: ServerSpec) -> dict[str, Any]:
    """A LOCAL server spec (env values included: the transport is authenticated and private)."""
    assert isinstance(spec.target, LocalSpec), "only LOCAL servers run on runners"
    return dataclasses.asdict(spec)


def spec_from_json(raw: dict[str, Any]) -> ServerSpec:
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


def result_to_json(result: ToolResult) -> dict[str, Any]:
    return dataclasses.asdict(result)


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
