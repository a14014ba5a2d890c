"""HTTP tools: fill `${input.x}` / `${secret.y}` templates safely, send through the outbound guard.

The request is any `HttpRequestTemplate` (the saved tool's `tools_app.configs.http.HttpConfig` is one): the runtime
owns the placeholder grammar and the configs build on it, never the reverse."""

from __future__ import annotations

import dataclasses
import json
import re
import time
from collections.abc import Mapping
from typing import Any, Protocol
from urllib.parse import quote, urlsplit, urlunsplit

from core import secrets as secret_rules
from core.outbound import OutboundPolicy, fetch, safe_url
from core.secrets import Scrubber
from tools_app.runtime.errors import InvalidParams, RuntimeToolError
from tools_app.runtime.result import BUSINESS_ERROR, EXECUTION_ERROR, ToolResult
from tools_app.runtime.schemas import validate_arguments

EXCERPT_CHARS = 500
PLACEHOLDER = re.compile(r"\$\{(input|secret)\.([A-Za-z_][A-Za-z0-9_]*)\}")  # ${input.x} / ${secret.y}


class HttpRequestTemplate(Protocol):
    """One templated request as an HTTP tool sends it (validated when the tool was saved)."""

    @property
    def method(self) -> str: ...
    @property
    def url(self) -> str: ...
    @property
    def headers(self) -> Mapping[str, str]: ...
    @property
    def query(self) -> Mapping[str, str]: ...
    @property
    def body(self) -> Any: ...
    @property
    def secrets(self) -> Mapping[str, str]: ...
    @property
    def input_schema(self) -> dict[str, Any]: ...
    @property
    def timeout_s(self) -> float: ...


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

    def text(self, template: str, *, encode: bool = False, segment: bool = False) -> str:
        def repl(m: re.Match[str]) -> str:
            raw = self.value(m.group(1), m.group(2))
            s = raw if isinstance(raw, str) else json.dumps(raw)
            if not encode:
                return s
            encoded = quote(s, safe="")
            # In a path, a value is one segment: "." and ".." would otherwise be resolved by the
            # client (RFC 3986 dot segments) and climb out of the template's path prefix.
            return encoded.replace(".", "%2E") if segment else encoded

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
    parts = urlsplit(template)
    url = urlunsplit(
        (
            parts.scheme,
            parts.netloc,
            filler.text(parts.path, encode=True, segment=True),
            filler.text(parts.query, encode=True),
            "",
        )
    )
    after = urlsplit(url)
    if (after.scheme, after.hostname, after.port) != (parts.scheme, parts.hostname, parts.port):
        raise InvalidParams("substituted url changed its scheme, host or port (rule: no host injection)")
    return url


# -- running -------------------------------------------------------------------------------------


def run_http_tool(config: HttpRequestTemplate, arguments: dict[str, Any], *, policy: OutboundPolicy) -> ToolResult:
    """Call the configured endpoint with `arguments`; never raises, never shows a secret.

    `config` was validated when the tool was saved: it is taken as it is.
    """
    started = time.monotonic()
    scrubber = secret_rules.scrubber([*config.secrets.values(), *config.headers.values()])
    try:
        result = _run(config, arguments, policy, scrubber)
    except RuntimeToolError as exc:
        result = ToolResult.fail(exc.result_code, exc.message)
    except Exception as exc:  # noqa: BLE001 - a bug must not escape, nor leak a secret through its message
        result = ToolResult.fail(EXECUTION_ERROR, f"HTTP tool failed: {type(exc).__name__}")
    # The upstream may echo what it was sent: nothing leaves unscrubbed (the invoke boundary scrubs again).
    result.scrubbed(scrubber)
    result.cost_ms = int((time.monotonic() - started) * 1000)
    return result


def _run(config: HttpRequestTemplate, arguments: Any, policy: OutboundPolicy, scrubber: Scrubber) -> ToolResult:
    if not isinstance(arguments, dict):
        raise InvalidParams("arguments must be a JSON object")
    validate_arguments(config.input_schema, arguments)  # the one argument rule (invoke checks it too)
    filler = _Filler(arguments, config.secrets)
    method = config.method
    url = build_url(config.url, filler)
    headers = {}
    for name, template in config.headers.items():
        value = filler.text(template)
        if "\r" in value or "\n" in value:
            raise InvalidParams(f"header {name!r} would contain a line break after substitution")
        headers[name] = value
    query = {}
    for name, template in config.query.items():
        whole = PLACEHOLDER.fullmatch(template)
        if whole and whole.group(1) == "input" and whole.group(2) not in arguments:
            continue  # an optional argument left out drops its query parameter
        query[name] = filler.text(template)
    body = config.body
    content: str | None = None
    json_body: Any = None
    if body is not None and method != "GET":
        filled = filler.body(body)
        if isinstance(filled, str):
            content = filled
        else:
            json_body = filled
    timeout = float(config.timeout_s)
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



__all__ = ["PLACEHOLDER", "HttpRequestTemplate", "run_http_tool"]
