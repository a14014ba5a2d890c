"""HTTP tools: fill `${input.x}` / `${secret.y}` templates safely, send through the outbound guard."""

from __future__ import annotations

import dataclasses
import json
import re
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import jsonschema

from core.outbound import OutboundPolicy, fetch, safe_url
from core.secrets import Scrubber, scrubber_for_maps
from tools_app.runtime.errors import InvalidParams, RuntimeToolError
from tools_app.runtime.result import BUSINESS_ERROR, EXECUTION_ERROR, ToolResult

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
CONFIG_KEYS = frozenset({"method", "url", "headers", "query", "body", "secrets", "input_schema", "timeout_s"})
PLACEHOLDER = re.compile(r"\$\{(input|secret)\.([A-Za-z_][A-Za-z0-9_]*)\}")
ANY_PLACEHOLDER = re.compile(r"\$\{[^}]*\}")
EXCERPT_CHARS = 500
DEFAULT_TIMEOUT_S = 30.0
# The origin and framing stay the client's: a templated Host could re-target a shared IP.
RESERVED_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection"})


# -- config validation ---------------------------------------------------------------------------


def validate_http_config(config: Any) -> None:
    """Raise InvalidParams if `config` is not a well-formed HTTP tool configuration."""
    if not isinstance(config, dict):
        raise InvalidParams("HTTP tool config must be an object")
    unknown = sorted(set(config) - CONFIG_KEYS)
    if unknown:
        raise InvalidParams(
            f"unknown config key(s) {', '.join(unknown)}; accepted: {', '.join(sorted(CONFIG_KEYS))}"
        )
    method = config.get("method", "GET")
    if not isinstance(method, str) or method.upper() not in METHODS:
        raise InvalidParams(f"method must be one of {', '.join(METHODS)}")
    url = config.get("url")
    if not isinstance(url, str) or not url:
        raise InvalidParams("url is required and must be a string")
    _check_url_template(url)
    for key in ("headers", "query", "secrets"):
        value = config.get(key, {})
        if value is None:
            continue
        if not isinstance(value, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        ):
            raise InvalidParams(f"{key} must be a map of strings to strings")
    for name, value in (config.get("headers") or {}).items():
        if not re.fullmatch(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+", name):
            raise InvalidParams(f"header name {name!r} is not a valid token")
        if "\r" in value or "\n" in value:
            raise InvalidParams(f"header {name!r} contains a line break")
        if name.lower() in RESERVED_HEADERS:
            raise InvalidParams(f"header {name!r} is set by the client and may not be configured")
    schema = config.get("input_schema")
    if schema is not None:
        if not isinstance(schema, dict):
            raise InvalidParams("input_schema must be a JSON Schema object")
        try:
            jsonschema.Draft202012Validator.check_schema(schema)
        except jsonschema.SchemaError as exc:
            raise InvalidParams(f"input_schema is not a valid JSON Schema: {exc.message}") from None
    timeout = config.get("timeout_s", DEFAULT_TIMEOUT_S)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout <= 300:
        raise InvalidParams("timeout_s must be a number between 0 and 300")
    secrets = config.get("secrets") or {}
    for match in PLACEHOLDER.finditer(
        json.dumps({k: config.get(k) for k in ("url", "headers", "query", "body")})
    ):
        if match.group(1) == "secret" and match.group(2) not in secrets:
            raise InvalidParams(f"placeholder ${{secret.{match.group(2)}}} names no configured secret")


def _check_url_template(url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise InvalidParams("url must start with http:// or https://")
    if ANY_PLACEHOLDER.search(parts.scheme + "://" + parts.netloc):
        raise InvalidParams(
            "url placeholders may only appear in the path or query (rule: no placeholder in scheme, host or port)"
        )
    if not parts.hostname:
        raise InvalidParams("url has no host")
    if parts.fragment and ANY_PLACEHOLDER.search(parts.fragment):
        raise InvalidParams("url placeholders may not appear in the fragment")
    try:
        _ = parts.port
    except ValueError:
        raise InvalidParams("url has an invalid port") from None


# -- substitution --------------------------------------------------------------------------------


class _Filler:
    def __init__(self, arguments: Mapping[str, Any], secrets: Mapping[str, str]) -> None:
        self.arguments = arguments
        self.secrets = secrets

    def value(self, kind: str, name: str) -> Any:
        if kind == "secret":
            if name not in self.secrets:
                raise InvalidParams(f"placeholder ${{secret.{name}}} names no configured secret")
            return self.secrets[name]
        if name not in self.arguments:
            raise InvalidParams(f"missing argument {name!r} used by placeholder ${{input.{name}}}")
        return self.arguments[name]

    def text(self, template: str, *, encode: bool = False) -> str:
        def repl(m: re.Match[str]) -> str:
            raw = self.value(m.group(1), m.group(2))
            s = raw if isinstance(raw, str) else json.dumps(raw)
            return quote(s, safe="") if encode else s

        return PLACEHOLDER.sub(repl, template)

    def body(self, template: Any) -> Any:
        if isinstance(template, str):
            whole = PLACEHOLDER.fullmatch(template)
            return self.value(whole.group(1), whole.group(2)) if whole else self.text(template)
        if isinstance(template, list):
            return [self.body(v) for v in template]
        if isinstance(template, dict):
            return {k: self.body(v) for k, v in template.items()}
        return template


def build_url(template: str, filler: _Filler) -> str:
    """Substitute into path and query only, percent-encoded; the origin must stay the template's."""
    _check_url_template(template)
    parts = urlsplit(template)
    url = urlunsplit(
        (
            parts.scheme,
            parts.netloc,
            filler.text(parts.path, encode=True),
            filler.text(parts.query, encode=True),
            "",
        )
    )
    after = urlsplit(url)
    if (after.scheme, after.hostname, after.port) != (parts.scheme, parts.hostname, parts.port):
        raise InvalidParams("substituted url changed its scheme, host or port (rule: no host injection)")
    return url


# -- running -------------------------------------------------------------------------------------


def run_http_tool(config: dict[str, Any], arguments: dict[str, Any], *, policy: OutboundPolicy) -> ToolResult:
    """Call the configured endpoint with `arguments`; never raises, never shows a secret."""
    started = time.monotonic()
    scrubber = scrubber_for_maps(config if isinstance(config, dict) else None, ("secrets", "headers"))
    try:
        result = _run(config, arguments, policy, scrubber)
    except RuntimeToolError as exc:
        result = ToolResult.fail(exc.result_code, exc.message)
    except Exception as exc:  # a bug must not escape, nor leak a secret through its message
        result = ToolResult.fail(EXECUTION_ERROR, f"HTTP tool failed: {type(exc).__name__}")
    # The upstream may echo what it was sent: nothing leaves unscrubbed (the invoke boundary scrubs again).
    result.scrubbed(scrubber)
    result.cost_ms = int((time.monotonic() - started) * 1000)
    return result


def _run(config: dict[str, Any], arguments: Any, policy: OutboundPolicy, scrubber: Scrubber) -> ToolResult:
    validate_http_config(config)
    if not isinstance(arguments, dict):
        raise InvalidParams("arguments must be a JSON object")
    _validate_arguments(config.get("input_schema"), arguments)
    filler = _Filler(arguments, config.get("secrets") or {})
    method = str(config.get("method", "GET")).upper()
    url = build_url(config["url"], filler)
    headers = {}
    for name, template in (config.get("headers") or {}).items():
        value = filler.text(template)
        if "\r" in value or "\n" in value:
            raise InvalidParams(f"header {name!r} would contain a line break after substitution")
        headers[name] = value
    query = {}
    for name, template in (config.get("query") or {}).items():
        whole = PLACEHOLDER.fullmatch(template)
        if whole and whole.group(1) == "input" and whole.group(2) not in arguments:
            continue  # an optional argument left out drops its query parameter
        query[name] = filler.text(template)
    body = config.get("body")
    content: str | None = None
    json_body: Any = None
    if body is not None and method != "GET":
        filled = filler.body(body)
        if isinstance(filled, str):
            content = filled
        else:
            json_body = filled
    timeout = float(config.get("timeout_s", DEFAULT_TIMEOUT_S))
    call_policy = dataclasses.replace(policy, timeout_s=min(timeout, policy.timeout_s))
    response = fetch(
        method,
        url,
        policy=call_policy,
        headers=headers,
        params=query or None,
        content=content,
        json=json_body,
    )
    if not 200 <= response.status < 300:
        excerpt = scrubber.text(response.text)[:EXCERPT_CHARS]  # scrubbed before the cut
        return ToolResult.fail(
            BUSINESS_ERROR,
            f"HTTP {response.status} from {method} {safe_url(url)}: {excerpt}",
            status=response.status,
        )
    ctype = response.content_type
    if ctype == "application/json" or ctype.endswith("+json"):
        try:
            data = json.loads(response.content or b"null")
        except ValueError:
            return ToolResult.ok(text=response.text, status=response.status)
        return ToolResult.ok(
            data=data, text=scrubber.text(json.dumps(data, ensure_ascii=False))[: EXCERPT_CHARS * 20],
            status=response.status,
        )
    return ToolResult.ok(text=response.text, status=response.status)


def _validate_arguments(schema: Any, arguments: dict[str, Any]) -> None:
    if not isinstance(schema, dict):
        return
    props = schema.get("properties")
    if isinstance(props, dict) and schema.get("additionalProperties") is not True:
        unknown = sorted(set(arguments) - set(props))
        if unknown:
            raise InvalidParams(
                f"unknown argument(s) {', '.join(map(repr, unknown))}; accepted: {', '.join(sorted(props)) or '(none)'}"
            )
    errors = sorted(
        jsonschema.Draft202012Validator(schema).iter_errors(arguments), key=lambda e: list(e.path)
    )
    if errors:
        err = errors[0]
        where = ".".join(str(p) for p in err.path) or "(arguments)"
        raise InvalidParams(f"argument {where!r}: {err.message[:300]}")


__all__ = ["run_http_tool", "validate_http_config"]
