"""What to connect to: immutable LOCAL/REMOTE server specs built from a Tool's config."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tools_app.runtime.errors import InvalidParams

TRANSPORTS = ("streamable_http", "sse")


@dataclass(frozen=True)
class LocalSpec:
    command: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    cwd: str | None = None
    startup_timeout_s: float = 30
    call_timeout_s: float = 60
    version_check: bool = False

    # Env values are secrets: keep them out of reprs that may reach logs.
    def __repr__(self) -> str:
        names = [name for name, _ in self.env]
        return (
            f"LocalSpec(command={self.command!r}, args={self.args!r}, env={names!r}, cwd={self.cwd!r}, "
            f"startup_timeout_s={self.startup_timeout_s}, call_timeout_s={self.call_timeout_s})"
        )


@dataclass(frozen=True)
class RemoteSpec:
    url: str
    transport: str = "streamable_http"
    headers: tuple[tuple[str, str], ...] = ()
    timeout_s: float = 30

    # Header values are secrets: keep them out of reprs that may reach logs.
    def __repr__(self) -> str:
        names = [name for name, _ in self.headers]
        return f"RemoteSpec(url={self.url!r}, transport={self.transport!r}, headers={names!r}, timeout_s={self.timeout_s})"


@dataclass(frozen=True)
class ServerSpec:
    tool_id: int
    config_version: int
    tenant_key: str
    target: LocalSpec | RemoteSpec

    @property
    def key(self) -> tuple[int, int]:
        return (self.tool_id, self.config_version)

    @property
    def call_timeout_s(self) -> float:
        return self.target.call_timeout_s if isinstance(self.target, LocalSpec) else self.target.timeout_s

    @property
    def startup_timeout_s(self) -> float:
        return self.target.startup_timeout_s if isinstance(self.target, LocalSpec) else self.target.timeout_s


def _pairs(value: Any, what: str) -> tuple[tuple[str, str], ...]:
    if value in (None, ""):
        return ()
    if not isinstance(value, Mapping):
        raise InvalidParams(f"config.{what} must be an object of string values")
    return tuple(sorted((str(k), "" if v is None else str(v)) for k, v in value.items()))


def _number(config: Mapping[str, Any], key: str, default: float) -> float:
    value = config.get(key)
    if value in (None, ""):
        return default
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise InvalidParams(f"config.{key} must be a number") from None
    if number <= 0:
        raise InvalidParams(f"config.{key} must be positive")
    return number


def spec_from_config(
    *, tool_id: int, config_version: int, tenant_key: str, tool_type: str, config: dict[str, Any]
) -> ServerSpec:
    """Build a ServerSpec from a LOCAL or REMOTE tool config (DESIGN §3); InvalidParams if malformed."""
    target: LocalSpec | RemoteSpec
    if tool_type == "LOCAL":
        command = config.get("command")
        if not isinstance(command, str) or not command.strip():
            raise InvalidParams("config.command is required for a LOCAL tool")
        args = config.get("args") or []
        if not isinstance(args, list | tuple):
            raise InvalidParams("config.args must be a list of strings")
        cwd = config.get("cwd") or None
        target = LocalSpec(
            command=command.strip(),
            args=tuple(str(a) for a in args),
            env=_pairs(config.get("env"), "env"),
            cwd=str(cwd) if cwd else None,
            startup_timeout_s=_number(config, "startup_timeout_s", 30),
            call_timeout_s=_number(config, "call_timeout_s", 60),
            version_check=bool(config.get("version_check", False)),
        )
    elif tool_type == "REMOTE":
        url = config.get("url")
        if not isinstance(url, str) or not url.strip():
            raise InvalidParams("config.url is required for a REMOTE tool")
        transport = str(config.get("transport") or "streamable_http").replace("-", "_")
        if transport not in TRANSPORTS:
            raise InvalidParams(
                f"config.transport {transport!r} is not supported; accepted: {', '.join(TRANSPORTS)}"
            )
        target = RemoteSpec(
            url=url.strip(),
            transport=transport,
            headers=_pairs(config.get("headers"), "headers"),
            timeout_s=_number(config, "timeout_s", 30),
        )
    else:
        raise InvalidParams(f"tool type {tool_type!r} is not an MCP server type; accepted: LOCAL, REMOTE")
    return ServerSpec(tool_id=tool_id, config_version=config_version, tenant_key=tenant_key, target=target)
