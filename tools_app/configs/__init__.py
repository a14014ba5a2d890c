"""One typed config spec per tool type, validated once on save; the runtime takes it as it is.

Django-free (an import-linter contract checks it). The secret rules themselves live in core.secrets;
this package says which fields of each type are secret maps.
"""

from __future__ import annotations

from typing import Any

from core import secrets
from tools_app.configs.base import MAX_CONFIG_BYTES, MAX_CONFIG_DEPTH, ConfigSpec, FieldDoc
from tools_app.configs.builtin import BuiltinConfig
from tools_app.configs.http import HttpConfig
from tools_app.configs.local import LocalConfig
from tools_app.configs.remote import RemoteConfig
from tools_app.errors import InvalidConfig
from tools_app.runtime.mcp.spec import ServerSpec
from tools_app.runtime.sandbox import ServerSandbox

SPECS: dict[str, type[ConfigSpec]] = {spec.tool_type: spec for spec in (LocalConfig, RemoteConfig, HttpConfig,
                                                                          BuiltinConfig)}
# Maps whose values are secret, per tool type (from the specs' field flags).
SECRET_MAPS: dict[str, tuple[str, ...]] = {name: spec.secret_maps() for name, spec in SPECS.items()}
# Single secret values inside an object field (section, key), per tool type: write-only like the maps' values.
SECRET_FIELDS: dict[str, tuple[tuple[str, str], ...]] = {"REMOTE": (("auth", "client_secret"),)}

__all__ = [
    "MAX_CONFIG_BYTES",
    "MAX_CONFIG_DEPTH",
    "SECRET_MAPS",
    "SPECS",
    "BuiltinConfig",
    "ConfigSpec",
    "FieldDoc",
    "HttpConfig",
    "LocalConfig",
    "RemoteConfig",
    "contains_mask",
    "describe",
    "load_config",
    "mask_config",
    "merge_masked",
    "parse_config",
    "secret_values",
    "server_spec",
    "validate_config",
]


def spec_for(tool_type: str) -> type[ConfigSpec]:
    spec = SPECS.get(str(tool_type))
    if spec is None:
        raise InvalidConfig(f"unknown tool type {tool_type!r}; accepted: {', '.join(SPECS)}", details={"field": "type"})
    return spec


def parse_config(tool_type: str, config: Any) -> ConfigSpec:
    """Validate `config` into its type's spec; InvalidConfig names the field (never a value)."""
    return spec_for(tool_type).parse(config)


def validate_config(tool_type: str, config: Any) -> dict[str, Any]:
    """Validate and normalise a config for storage."""
    if str(tool_type) == "BUILTIN" and config:
        raise InvalidConfig("built-in tools take no config", details={"field": "config"})
    return parse_config(tool_type, config).stored()


def load_config(tool_type: str, stored: dict[str, Any] | None) -> Any:
    """The spec of a stored (validated on save) config, for the runtime: no second validation."""
    return spec_for(tool_type).load(stored)


def server_spec(*, tool_id: int, config_version: int, tenant_key: str, tool_type: str, config: Any,
                validated: bool = False, default_roots: tuple[str, ...] = (),
                sandbox: ServerSandbox | None = None) -> ServerSpec:
    """The MCP pool's spec of a LOCAL or REMOTE config: a stored (`validated`) one is taken as it is.

    A LOCAL config without `roots` offers `default_roots` (the tenant workspace) as MCP roots; `sandbox` confines it.
    """
    spec = load_config(tool_type, config) if validated else parse_config(tool_type, config)
    if not isinstance(spec, LocalConfig | RemoteConfig):
        raise InvalidConfig(f"tool type {tool_type!r} is not an MCP server type; accepted: LOCAL, REMOTE",
                            details={"field": "type"})
    target = spec.target(default_roots, sandbox) if isinstance(spec, LocalConfig) else spec.target()
    return ServerSpec(tool_id=tool_id, config_version=config_version, tenant_key=tenant_key, target=target)


def describe(tool_type: str) -> list[FieldDoc]:
    """The fields of a type's config (name, type, required, default, secret, help) for generated forms."""
    return spec_for(tool_type).describe()


def _secret_fields(tool_type: str, config: Any) -> list[tuple[dict[str, Any], str, str]]:
    """(section, section name, key) of every single secret value set in `config`."""
    found = []
    for section_name, key in SECRET_FIELDS.get(str(tool_type), ()):
        section = config.get(section_name) if isinstance(config, dict) else None
        if isinstance(section, dict) and section.get(key):
            found.append((section, section_name, key))
    return found


def contains_mask(tool_type: str, config: dict[str, Any]) -> list[str]:
    """Keys (as `map.key`) whose value is the mask placeholder."""
    fields = [f"{name}.{key}" for section, name, key in _secret_fields(tool_type, config) if section[key] == secrets.MASK]
    return secrets.masked_keys(config, SECRET_MAPS[tool_type]) + fields


def merge_masked(tool_type: str, *, stored: dict[str, Any] | None, incoming: dict[str, Any]) -> dict[str, Any]:
    """An incoming `"********"` keeps the stored value under that key; anything else replaces."""
    merged = secrets.merge_masked(stored=stored, incoming=incoming, secret_maps=SECRET_MAPS[tool_type],
                                  error=InvalidConfig)
    for section, name, key in _secret_fields(tool_type, merged):
        if section[key] == secrets.MASK:
            old = ((stored or {}).get(name) or {}).get(key)
            if not old:
                field = f"config.{name}.{key}"
                raise InvalidConfig(f"{field} is {secrets.MASK!r} but no value is stored under that key; "
                                    "send the real value", details={"field": field})
            section[key] = old
    return merged


def mask_config(tool_type: str, config: dict[str, Any] | None) -> dict[str, Any]:
    """The config's structure with every secret-map value replaced by the mask."""
    masked = secrets.mask_maps(config, SECRET_MAPS[tool_type])
    for section, _name, key in _secret_fields(tool_type, masked):
        section[key] = secrets.MASK
    return masked


def secret_values(tool_type: str, config: dict[str, Any] | None) -> list[str]:
    """Every secret value in a config (what the scrubber masks in everything that leaves a call)."""
    values = secrets.secret_values(config, SECRET_MAPS.get(tool_type, ()))
    return values + [str(section[key]) for section, _n, key in _secret_fields(tool_type, config)]
