"""What every tool config spec shares: strict pydantic models, secret-map fields, caps, and errors naming fields."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, TypeVar, cast, get_args, get_origin
from urllib.parse import urlsplit

import pydantic
from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from tools_app.errors import InvalidConfig

# A stored config is read on every call and shown on every detail page: bound it before anything is written.
MAX_CONFIG_DEPTH = 24
MAX_CONFIG_BYTES = 256 * 1024
TIMEOUT_RANGE = (1, 300)
# RFC 9110 token characters: a header name outside them cannot be sent.
HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,256}$")
# Framing and routing stay the client's: a configured Host could re-target a shared IP.
RESERVED_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection"})

S = TypeVar("S", bound="ConfigSpec")


def secret_map(description: str) -> Any:
    """A field mapping names to secret string values: encrypted, write-only, masked, scrubbed from output."""
    return Field(default_factory=dict, description=description, json_schema_extra={"secret": True})


def not_secret_field() -> Any:
    """The list of secret-map entries (`map.key`) whose values are not secret: shown, editable, not scrubbed."""
    return Field(default_factory=list, description="Entries of the secret maps whose values are not secret, as "
                                                   "map.key (e.g. env.CURRENCY): shown and editable, not masked")


MAX_USER_SECRETS = 20


def user_secrets_field(what: str) -> Any:
    """The keys each member sets for themselves (PUT /tools/{id}/my-credentials/): never in the config itself."""
    return Field(default_factory=list, description=f"{what} each member sets for themselves (their own account's "
                                                   "key: PUT /api/v1/tools/{id}/my-credentials/); write-only, "
                                                   "encrypted; a call without them answers CREDENTIALS_REQUIRED")


def check_user_secrets(names: list[str], *, pattern: re.Pattern[str], kind: str, configured: Mapping[str, str]) -> list[str]:
    """Valid `kind` names, at most MAX_USER_SECRETS, none also set in the shared config (`configured`)."""
    if len(names) > MAX_USER_SECRETS:
        raise ValueError(f"at most {MAX_USER_SECRETS} per-user keys are accepted")
    for name in names:
        if not pattern.match(name):
            raise ValueError(f"{name[:100]!r} is not a valid {kind} name")
        if kind == "HTTP header" and name.lower() in RESERVED_HEADERS:
            raise ValueError(f"header {name!r} is set by the client and may not be configured")
    shared = {n.lower() for n in configured}
    clash = sorted(n for n in names if n.lower() in shared)
    if clash:
        raise ValueError(f"{', '.join(clash)} is set in the config too: a key is either shared or per user")
    return sorted(set(names))


def timeout(default: float, description: str) -> Any:
    lo, hi = TIMEOUT_RANGE
    return Field(default=default, ge=lo, le=hi, description=f"{description} ({lo}-{hi} s)")


@dataclass(frozen=True)
class FieldDoc:
    """One field of a spec as a form builder needs it."""

    name: str
    type: str
    required: bool
    default: Any
    secret: bool
    help: str
    choices: tuple[Any, ...] = ()


class ConfigSpec(BaseModel):
    """Base of every tool type's config: strict (no coercion), closed (unknown keys refused), immutable."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    tool_type: ClassVar[str] = ""

    @classmethod
    def secret_maps(cls) -> tuple[str, ...]:
        return tuple(name for name, f in cls.model_fields.items() if _is_secret(f))

    @classmethod
    def describe(cls) -> list[FieldDoc]:
        """The spec's fields: name, type, required, default, secret flag and help text (for generated forms)."""
        docs = []
        for name, f in cls.model_fields.items():
            default = None if f.is_required() else f.get_default(call_default_factory=True)
            if isinstance(default, BaseModel):  # a sub-object (REMOTE `auth`): its JSON form
                default = default.model_dump(mode="json")
            choices = get_args(f.annotation) if get_origin(f.annotation) is Literal else ()
            docs.append(FieldDoc(name=name, type="str" if choices else _type_name(f.annotation),
                                 required=f.is_required(), default=default, secret=_is_secret(f),
                                 help=f.description or "", choices=tuple(choices)))
        return docs

    @classmethod
    def parse(cls: type[S], config: Any) -> S:
        """Validate a config (caps, unknown keys, every field rule); InvalidConfig names the field, never a value."""
        if not isinstance(config, dict):
            raise InvalidConfig("config must be a JSON object", details={"field": "config"})
        check_caps(config)
        accepted = tuple(cls.model_fields)
        unknown = sorted(set(config) - set(accepted))
        if unknown:
            raise InvalidConfig(
                f"config has unknown keys {unknown}; accepted: {', '.join(accepted)}",
                details={"field": f"config.{unknown[0]}", "unknown": unknown, "accepted": list(accepted)},
            )
        try:
            return cls.model_validate(config)
        except pydantic.ValidationError as exc:
            raise _invalid(exc) from None

    @classmethod
    def load(cls: type[S], stored: Mapping[str, Any] | None) -> S:
        """A spec from a stored config, validated when it was saved: taken as it is, no second validation."""
        data = dict(stored or {})
        # Fields left out of the stored config (an empty not_secret, keys added since it was saved) are filled
        # here: pydantic's model_construct inspects a default factory's signature on every call, which for
        # `list`/`dict` parses their text signature (~0.2 ms on each MCP call).
        for name, factory in _factories(cls):
            if name not in data:
                data[name] = factory()
        return cls.model_construct(**data)

    def stored(self) -> dict[str, Any]:
        """The normalised config to store (defaults filled in; an empty not_secret or user_secrets list left out,
        so configs saved before they existed compare equal)."""
        data = self.model_dump(mode="json")
        for optional in ("not_secret", "user_secrets"):
            if optional in data and not data[optional]:
                data.pop(optional)
        return data

    @field_validator("not_secret", check_fields=False)
    @classmethod
    def _not_secret_names_entries(cls, listed: list[str], info: ValidationInfo) -> list[str]:
        # Declared last in every spec: the secret maps are validated and in `info.data` by now.
        maps = cls.secret_maps()
        for item in listed:
            map_name, _, key = item.partition(".")
            if map_name not in maps or key not in (info.data.get(map_name) or {}):
                entries = [f"{m}.{k}" for m in maps for k in (info.data.get(m) or {})]
                raise ValueError(f"entry {item[:200]!r} names no entry of a secret map "
                                 f"({', '.join(maps)}); entries: {', '.join(entries) or '(none)'}")
        return sorted(set(listed))


@functools.cache
def _factories(cls: type[ConfigSpec]) -> tuple[tuple[str, Callable[[], Any]], ...]:
    """(field name, default factory) of the fields whose default is made by a no-argument factory."""
    out = []
    for name, f in cls.model_fields.items():
        factory = f.default_factory
        if factory is not None and not f.default_factory_takes_validated_data:
            out.append((name, cast(Callable[[], Any], factory)))
    return tuple(out)


def _is_secret(f: Any) -> bool:
    extra = f.json_schema_extra
    return isinstance(extra, dict) and bool(extra.get("secret"))


def _type_name(annotation: Any) -> str:
    if get_origin(annotation) is not None or annotation is Any:
        return str(annotation).replace("typing.", "")
    return getattr(annotation, "__name__", None) or str(annotation)


def _invalid(exc: pydantic.ValidationError) -> InvalidConfig:
    errors = []
    for err in exc.errors(include_input=False, include_url=False):
        where = ".".join(str(p) for p in err["loc"] if p != "__root__")
        field = f"config.{where}" if where else "config"
        message = str(err["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")
        errors.append({"field": field, "message": message})
    first = errors[0]
    return InvalidConfig(f"{first['field']}: {first['message']}", details={"field": first["field"], "errors": errors})


def check_caps(config: Any) -> None:
    """Refuse configs nested deeper or larger than the caps (iteratively: a deep config must not recurse)."""
    stack: list[tuple[Any, int]] = [(config, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_CONFIG_DEPTH:
            raise InvalidConfig(f"config is nested deeper than {MAX_CONFIG_DEPTH} levels",
                                details={"field": "config", "max_depth": MAX_CONFIG_DEPTH})
        if isinstance(value, dict):
            stack += [(v, depth + 1) for v in value.values()]
        elif isinstance(value, list):
            stack += [(v, depth + 1) for v in value]
    size = len(json.dumps(config, ensure_ascii=False, default=str).encode())
    if size > MAX_CONFIG_BYTES:
        raise InvalidConfig(f"config is {size} bytes; at most {MAX_CONFIG_BYTES} are accepted",
                            details={"field": "config", "max_bytes": MAX_CONFIG_BYTES})


def check_http_url(url: str) -> str:
    """An http(s) URL with a host and a valid port."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise ValueError("must be an http:// or https:// URL with a valid host and a port from 1 to 65535") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("must be an http:// or https:// URL")
    if port == 0:
        raise ValueError("has port 0; use a port from 1 to 65535")
    return url


def check_headers(headers: Mapping[str, str]) -> Mapping[str, str]:
    """Header names must be tokens and not framing/routing headers; values single-line (named, never shown)."""
    for name, value in headers.items():
        if not HEADER_NAME.match(name):
            raise ValueError(f"header name {name[:100]!r} is not a valid HTTP header name")
        if name.lower() in RESERVED_HEADERS:
            raise ValueError(f"header {name!r} is set by the client and may not be configured")
        if "\r" in value or "\n" in value or "\x00" in value:
            raise ValueError(f"header {name!r} contains a line break")
    return headers
