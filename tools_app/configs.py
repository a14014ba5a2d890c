"""Per-type tool config: validation with defaults, masking for display, and masked-merge on update."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from core import secrets
from tools_app.errors import InvalidConfig
from tools_app.models import ToolType

# Maps whose values are secret, per tool type.
SECRET_MAPS: dict[str, tuple[str, ...]] = {
    ToolType.LOCAL: ("env",),
    ToolType.REMOTE: ("headers",),
    ToolType.HTTP: ("headers", "secrets"),
    ToolType.BUILTIN: (),
}
TIMEOUT_RANGE = (1, 300)
HTTP_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
TRANSPORTS = ("streamable_http", "sse")


def _fail(field: str, message: str, **details: Any) -> InvalidConfig:
    return InvalidConfig(f"config.{field}: {message}", details={"field": f"config.{field}", **details})


def _string(cfg: dict[str, Any], key: str, *, required: bool = False, default: str | None = None) -> str | None:
    value = cfg.get(key, default)
    if value is None or value == "":
        if required:
            raise _fail(key, "is required")
        return default
    if not isinstance(value, str):
        raise _fail(key, f"must be a string, not {type(value).__name__}")
    return value


def _string_list(cfg: dict[str, Any], key: str) -> list[str]:
    value = cfg.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _fail(key, "must be a list of strings")
    return list(value)


def _string_map(cfg: dict[str, Any], key: str) -> dict[str, str]:
    value = cfg.get(key, {})
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _fail(key, "must be an object mapping names to string values")
    for k, v in value.items():
        if not isinstance(k, str) or not k:
            raise _fail(key, "keys must be non-empty strings")
        if not isinstance(v, str):
            # Name the key, never the value: it may be a secret.
            raise _fail(f"{key}.{k}", f"must be a string, not {type(v).__name__}")
    return dict(value)


def _timeout(cfg: dict[str, Any], key: str, default: float) -> float:
    value = cfg.get(key, default)
    lo, hi = TIMEOUT_RANGE
    if isinstance(value, bool) or not isinstance(value, int | float) or not lo <= value <= hi:
        raise _fail(key, f"must be a number of seconds from {lo} to {hi}", accepted=[lo, hi])
    return float(value)


def _http_url(cfg: dict[str, Any], key: str) -> str:
    url = _string(cfg, key, required=True)
    assert url is not None
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise _fail(key, "must be an http:// or https:// URL", accepted=["http", "https"])
    return url


def _reject_unknown(cfg: dict[str, Any], accepted: tuple[str, ...]) -> None:
    unknown = sorted(set(cfg) - set(accepted))
    if unknown:
        raise InvalidConfig(
            f"config has unknown keys {unknown}; accepted: {', '.join(accepted)}",
            details={"unknown": unknown, "accepted": list(accepted)},
        )


LOCAL_KEYS = ("command", "args", "env", "cwd", "startup_timeout_s", "call_timeout_s", "version_check")
REMOTE_KEYS = ("url", "transport", "headers", "timeout_s")
HTTP_KEYS = ("method", "url", "headers", "query", "body", "secrets", "input_schema", "timeout_s")


def _local(cfg: dict[str, Any]) -> dict[str, Any]:
    _reject_unknown(cfg, LOCAL_KEYS)
    version_check = cfg.get("version_check", False)
    if not isinstance(version_check, bool):
        raise _fail("version_check", "must be true or false")
    return {
        "command": _string(cfg, "command", required=True),
        "args": _string_list(cfg, "args"),
        "env": _string_map(cfg, "env"),
        "cwd": _string(cfg, "cwd"),
        "startup_timeout_s": _timeout(cfg, "startup_timeout_s", 30),
        "call_timeout_s": _timeout(cfg, "call_timeout_s", 60),
        "version_check": version_check,
    }


def _remote(cfg: dict[str, Any]) -> dict[str, Any]:
    _reject_unknown(cfg, REMOTE_KEYS)
    transport = cfg.get("transport", "streamable_http")
    if transport not in TRANSPORTS:
        raise _fail("transport", f"must be one of {', '.join(TRANSPORTS)}", accepted=list(TRANSPORTS))
    return {
        "url": _http_url(cfg, "url"),
        "transport": transport,
        "headers": _string_map(cfg, "headers"),
        "timeout_s": _timeout(cfg, "timeout_s", 30),
    }


def _http(cfg: dict[str, Any]) -> dict[str, Any]:
    _reject_unknown(cfg, HTTP_KEYS)
    method = str(cfg.get("method", "GET")).upper()
    if method not in HTTP_METHODS:
        raise _fail("method", f"must be one of {', '.join(HTTP_METHODS)}", accepted=list(HTTP_METHODS))
    schema = cfg.get("input_schema", {"type": "object", "properties": {}})
    if not isinstance(schema, dict):
        raise _fail("input_schema", "must be a JSON Schema object")
    query = cfg.get("query", {})
    if not isinstance(query, dict):
        raise _fail("query", "must be an object")
    return {
        "method": method,
        "url": _http_url(cfg, "url"),
        "headers": _string_map(cfg, "headers"),
        "query": query,
        "body": cfg.get("body"),
        "secrets": _string_map(cfg, "secrets"),
        "input_schema": schema,
        "timeout_s": _timeout(cfg, "timeout_s", 30),
    }


def _builtin(cfg: dict[str, Any]) -> dict[str, Any]:
    if cfg:
        raise InvalidConfig("built-in tools take no config", details={"field": "config"})
    return {}


VALIDATORS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    ToolType.LOCAL: _local,
    ToolType.REMOTE: _remote,
    ToolType.HTTP: _http,
    ToolType.BUILTIN: _builtin,
}


def validate_config(tool_type: str, config: Any) -> dict[str, Any]:
    """Validate and normalise a config for `tool_type`; raise InvalidConfig naming the field."""
    if not isinstance(config, dict):
        raise InvalidConfig("config must be a JSON object", details={"field": "config"})
    return VALIDATORS[tool_type](config)


def contains_mask(tool_type: str, config: dict[str, Any]) -> list[str]:
    """Keys (as `map.key`) whose value is the mask placeholder."""
    return secrets.masked_keys(config, SECRET_MAPS[tool_type])


def merge_masked(tool_type: str, *, stored: dict[str, Any] | None, incoming: dict[str, Any]) -> dict[str, Any]:
    """An incoming `"********"` keeps the stored value under that key; anything else replaces."""
    return secrets.merge_masked(stored=stored, incoming=incoming, secret_maps=SECRET_MAPS[tool_type],
                                error=InvalidConfig)


def mask_config(tool_type: str, config: dict[str, Any] | None) -> dict[str, Any]:
    """The config's structure with every secret-map value replaced by the mask."""
    return secrets.mask_maps(config, SECRET_MAPS[tool_type])


def secret_values(tool_type: str, config: dict[str, Any] | None) -> list[str]:
    """Every secret value in a config (what the scrubber masks in everything that leaves a call)."""
    return secrets.secret_values(config, SECRET_MAPS.get(tool_type, ()))
