"""HTTP tools: one templated request (`${input.x}` / `${secret.y}`), its input schema and secrets."""

from __future__ import annotations

import json
import re
from typing import Any, ClassVar, Literal
from urllib.parse import urlsplit

import jsonschema
from pydantic import Field, ValidationInfo, field_validator, model_validator

from tools_app.configs.base import (
    HEADER_NAME,
    ConfigSpec,
    check_headers,
    check_http_url,
    check_user_secrets,
    not_secret_field,
    secret_map,
    timeout,
    user_secrets_field,
)
from tools_app.runtime.http_tool import PLACEHOLDER  # the runtime fills the templates this config holds

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
ANY_PLACEHOLDER = re.compile(r"\$\{[^}]*\}")
EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


def check_url_template(url: str) -> str:
    """Placeholders only in path and query: the origin (scheme, host, port) is fixed when the tool is saved."""
    parts = urlsplit(url)
    if ANY_PLACEHOLDER.search(url.split("://", 1)[0]) or ANY_PLACEHOLDER.search(parts.netloc):
        raise ValueError(
            "url placeholders may only appear in the path or query (rule: no placeholder in scheme, host or port)"
        )
    if parts.fragment and ANY_PLACEHOLDER.search(parts.fragment):
        raise ValueError("url placeholders may not appear in the fragment")
    return check_http_url(url)


class HttpConfig(ConfigSpec):
    tool_type: ClassVar[str] = "HTTP"

    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE"] = Field(default="GET", description="HTTP method")
    url: str = Field(description="http(s) URL; ${input.x} / ${secret.y} only in the path and query")
    headers: dict[str, str] = secret_map(
        "Request headers (templates allowed); values are secret unless listed in not_secret")
    query: dict[str, str] = Field(default_factory=dict, description="Query parameters (templates allowed)")
    body: Any = Field(default=None, description="JSON body template (not sent with GET)")
    secrets: dict[str, str] = Field(default_factory=dict, validate_default=True,
                                    description="Named secrets for ${secret.name} placeholders",
                                    json_schema_extra={"secret": True})
    input_schema: dict[str, Any] = Field(default_factory=lambda: dict(EMPTY_SCHEMA),
                                         description="JSON Schema (2020-12) of the call's arguments")
    timeout_s: float = timeout(30, "Total time the request may take")
    user_secrets: list[str] = user_secrets_field("Request headers")
    not_secret: list[str] = not_secret_field()

    @model_validator(mode="before")
    @classmethod
    def _default_schema(cls, data: Any) -> Any:
        # No schema given: each ${input.x} is an optional argument of any type (not "no arguments at all").
        if isinstance(data, dict) and data.get("input_schema") is None:
            named = json.dumps([data.get(k) for k in ("url", "headers", "query", "body")], default=str)
            inputs = sorted({m.group(2) for m in PLACEHOLDER.finditer(named) if m.group(1) == "input"})
            data = {**data, "input_schema": {"type": "object", "properties": {name: {} for name in inputs}}}
        return data

    @field_validator("method", mode="before")
    @classmethod
    def _method(cls, value: object) -> object:
        return value.upper() if isinstance(value, str) else value

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        return check_url_template(value.strip())

    @field_validator("user_secrets")
    @classmethod
    def _user_secrets(cls, value: list[str], info: ValidationInfo) -> list[str]:
        return check_user_secrets(value, pattern=HEADER_NAME, kind="HTTP header", configured=info.data.get("headers") or {})

    @field_validator("headers")
    @classmethod
    def _headers(cls, value: dict[str, str]) -> dict[str, str]:
        check_headers(value)
        return value

    @field_validator("input_schema")
    @classmethod
    def _schema(cls, value: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        try:
            jsonschema.Draft202012Validator.check_schema(value)
        except jsonschema.SchemaError as exc:
            raise ValueError(f"is not a valid JSON Schema: {exc.message[:300]}") from None
        if value.get("type", "object") != "object":
            raise ValueError('must describe an object (arguments are a JSON object): use "type": "object"')
        # Every ${input.x} must be an argument the schema accepts, or no call could ever fill it.
        properties = value.get("properties")
        if isinstance(properties, dict) and not value.get("additionalProperties"):
            named = json.dumps([info.data.get(k) for k in ("url", "headers", "query", "body")])
            missing = sorted({m.group(2) for m in PLACEHOLDER.finditer(named)
                              if m.group(1) == "input" and m.group(2) not in properties})
            if missing:
                raise ValueError(f"has no property for placeholder(s) {', '.join('${input.' + n + '}' for n in missing)}; "
                                 f"properties: {', '.join(sorted(properties)) or '(none)'}")
        return value

    @field_validator("secrets")
    @classmethod
    def _secret_names(cls, value: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        # Declared after url, headers, query and body: those are validated and in `info.data` by now.
        named = json.dumps([info.data.get(k) for k in ("url", "headers", "query", "body")])
        for match in PLACEHOLDER.finditer(named):
            if match.group(1) == "secret" and match.group(2) not in value:
                raise ValueError(
                    f"placeholder ${{secret.{match.group(2)}}} names no configured secret; "
                    f"configured: {', '.join(sorted(value)) or '(none)'}"
                )
        return value
