"""HTTP tool runner against a real http.server on 127.0.0.1: templates, guard, caps and secret scrubbing."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from core.outbound import OutboundPolicy
from tools_app.configs import HttpConfig
from tools_app.errors import InvalidConfig
from tools_app.runtime import http_tool

SECRET = "s3cr3t-Value/with+chars"
POLICY = OutboundPolicy.build(allow="127.0.0.1/32", max_bytes=64 * 1024, timeout_s=5)


class Handler(BaseHTTPRequestHandler):
    seen: list[dict[str, Any]] = []

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, status: int, body: bytes, ctype: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client stopped reading at its size cap

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode() if length else ""
        parts = urlsplit(self.path)
        record = {
            "method": self.command,
            "path": parts.path,
            "raw_path": self.path,
            "query": parse_qs(parts.query),
            "headers": dict(self.headers.items()),
            "body": body,
        }
        Handler.seen.append(record)
        if parts.path.startswith("/json"):
            self._send(200, json.dumps(record).encode(), "application/json; charset=utf-8")
        elif parts.path == "/text":
            self._send(200, b"plain text answer", "text/plain")
        elif parts.path.startswith("/missing"):
            self._send(404, ("not here; you sent " + json.dumps(record) + "x" * 2000).encode(), "text/plain")
        elif parts.path == "/big":
            self._send(200, b"a" * (POLICY.max_bytes * 4), "text/plain")
        elif parts.path == "/slow":
            time.sleep(2)
            self._send(200, b"late", "text/plain")
        else:
            self._send(200, json.dumps(record).encode(), "application/json")

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(autouse=True)
def _clear() -> None:
    Handler.seen.clear()


def run_http_tool(config: dict[str, Any] | HttpConfig, arguments: Any, **kw: Any) -> Any:
    """The runtime takes a spec validated on save; here the test saves it (parses) first."""
    spec = config if isinstance(config, HttpConfig) else HttpConfig.parse(config)
    return http_tool.run_http_tool(spec, arguments, **kw)


def cfg(server: str, path: str, **extra: Any) -> dict[str, Any]:
    return {"method": "GET", "url": server + path, **extra}


def test_json_response_becomes_data(server: str) -> None:
    config = cfg(
        server,
        "/json/${input.item}",
        query={"q": "${input.q}", "fixed": "1"},
        input_schema={
            "type": "object",
            "properties": {"item": {"type": "string"}, "q": {"type": "string"}},
            "required": ["item"],
        },
    )
    result = run_http_tool(config, {"item": "a b", "q": "x&admin=true"}, policy=POLICY)
    assert result.success, result
    assert result.data["path"] == "/json/a%20b"
    assert result.data["query"] == {"q": ["x&admin=true"], "fixed": ["1"]}


def test_optional_query_placeholder_is_dropped_when_absent(server: str) -> None:
    result = run_http_tool(cfg(server, "/json", query={"q": "${input.q}"}), {}, policy=POLICY)
    assert result.success and result.data["query"] == {}


def test_text_response_becomes_text(server: str) -> None:
    result = run_http_tool(cfg(server, "/text"), {}, policy=POLICY)
    assert result.success and result.text == "plain text answer" and result.data is None


def test_post_json_body_keeps_types(server: str) -> None:
    config = {
        "method": "POST",
        "url": server + "/json",
        "body": {"n": "${input.n}", "label": "id-${input.n}"},
    }
    result = run_http_tool(config, {"n": 7}, policy=POLICY)
    assert result.success
    assert json.loads(result.data["body"]) == {"n": 7, "label": "id-7"}


def test_non_2xx_is_business_error_with_short_excerpt(server: str) -> None:
    result = run_http_tool(cfg(server, "/missing"), {}, policy=POLICY)
    assert result.error_code == "BUSINESS_ERROR"
    assert "HTTP 404" in (result.error or "") and "not here" in (result.error or "")
    assert len(result.error or "") < 500 + 200


def test_big_body_is_capped(server: str) -> None:
    result = run_http_tool(cfg(server, "/big"), {}, policy=POLICY)
    assert result.error_code == "BUSINESS_ERROR" and "exceeds the cap" in (result.error or "")


def test_timeout(server: str) -> None:
    quick = HttpConfig.parse(cfg(server, "/slow")).model_copy(update={"timeout_s": 0.3})  # below the save minimum
    result = run_http_tool(quick, {}, policy=POLICY)
    assert result.error_code == "TIMEOUT"


def test_loopback_refused_without_the_allow_entry(server: str) -> None:
    result = run_http_tool(cfg(server, "/json"), {}, policy=OutboundPolicy())
    assert result.error_code == "BUSINESS_ERROR" and "loopback" in (result.error or "")
    assert Handler.seen == []


def test_secret_header_reaches_the_server_but_never_the_result(server: str) -> None:
    config = cfg(
        server, "/json", headers={"Authorization": "Bearer ${secret.token}"}, secrets={"token": SECRET}
    )
    result = run_http_tool(config, {}, policy=POLICY)
    assert result.success
    assert Handler.seen[0]["headers"]["Authorization"] == f"Bearer {SECRET}"
    dumped = json.dumps(result.as_dict()) + repr(result.meta)
    assert SECRET not in dumped and "********" in dumped


@pytest.mark.parametrize("path", ["/missing?key=${secret.token}", "/missing/${secret.token}"])
def test_secret_in_url_is_scrubbed_from_errors(server: str, path: str) -> None:
    config = cfg(server, path, headers={"X-Key": "${secret.token}"}, secrets={"token": SECRET})
    result = run_http_tool(config, {}, policy=POLICY)
    assert result.error_code == "BUSINESS_ERROR"
    assert Handler.seen, "the request reached the server"
    from urllib.parse import quote

    for form in (SECRET, quote(SECRET, safe=""), quote(SECRET)):
        assert form not in (result.error or "")


def test_secret_is_scrubbed_from_exception_messages(server: str) -> None:
    config = {"method": "GET", "url": "http://127.0.0.1:1/x?k=${secret.token}", "secrets": {"token": SECRET}}
    result = run_http_tool(config, {}, policy=POLICY)
    assert not result.success and SECRET not in (result.error or "")


# (id, url template, arguments, rule fragment): placeholders may never move the request to another origin.
HOST_INJECTION = [
    (
        "host-placeholder",
        "http://${input.host}/x",
        {"host": "127.0.0.1"},
        "no placeholder in scheme, host or port",
    ),
    (
        "host-suffix",
        "http://127.0.0.1${input.h}/x",
        {"h": ".evil.com"},
        "no placeholder in scheme, host or port",
    ),
    (
        "port-placeholder",
        "http://127.0.0.1:${input.port}/x",
        {"port": "22"},
        "no placeholder in scheme, host or port",
    ),
    (
        "userinfo",
        "http://${input.u}@127.0.0.1/x",
        {"u": "evil.com"},
        "no placeholder in scheme, host or port",
    ),
    ("scheme", "${input.s}://127.0.0.1/x", {"s": "file"}, "no placeholder in scheme, host or port"),
]


@pytest.mark.parametrize(
    ("url", "arguments", "rule"), [h[1:] for h in HOST_INJECTION], ids=[h[0] for h in HOST_INJECTION]
)
def test_host_injection_is_refused_on_save(url: str, arguments: dict[str, Any], rule: str) -> None:
    with pytest.raises(InvalidConfig) as exc:
        HttpConfig.parse({"method": "GET", "url": url})
    assert rule in exc.value.message and exc.value.details["field"] == "config.url"
    assert Handler.seen == []


@pytest.mark.parametrize(
    "value", ["@evil.com/x", "//evil.com/x", "../../admin", "x?y=1#frag", "%2F..%2F", "\r\nHost: evil"]
)
def test_path_values_are_encoded_and_stay_on_the_template_host(server: str, value: str) -> None:
    result = run_http_tool(cfg(server, "/json/${input.p}"), {"p": value}, policy=POLICY)
    assert result.success, result
    assert len(Handler.seen) == 1 and Handler.seen[0]["path"].startswith("/json/")
    assert "/" not in Handler.seen[0]["path"][len("/json/") :]
    assert Handler.seen[0]["headers"]["Host"].startswith("127.0.0.1")


def test_header_line_break_injection_is_refused(server: str) -> None:
    config = cfg(server, "/json", headers={"X-A": "${input.a}"})
    result = run_http_tool(config, {"a": "x\r\nX-Evil: 1"}, policy=POLICY)
    assert result.error_code == "INVALID_PARAMS" and "line break" in (result.error or "")
    assert Handler.seen == []


@pytest.mark.parametrize(
    ("arguments", "fragment"),
    [
        ({"item": 3}, "argument item"),
        ({"item": "a", "extra": 1}, "accepted: item"),
        ({}, "'item' is a required property"),
    ],
)
def test_arguments_are_validated_against_input_schema(
    server: str, arguments: dict[str, Any], fragment: str
) -> None:
    schema = {"type": "object", "properties": {"item": {"type": "string"}}, "required": ["item"]}
    result = run_http_tool(cfg(server, "/json/${input.item}", input_schema=schema), arguments, policy=POLICY)
    assert result.error_code == "INVALID_PARAMS" and fragment in (result.error or ""), result.error
    assert Handler.seen == []


def test_missing_placeholder_argument(server: str) -> None:
    result = run_http_tool(cfg(server, "/json/${input.item}"), {}, policy=POLICY)
    assert result.error_code == "INVALID_PARAMS" and "'item'" in (result.error or "")


# (id, config, the field named in details, and where one field has several rules, the rule the message names)
BAD_CONFIGS = [
    ("not-a-dict", [], "config", ""),
    ("method", {"method": "TRACE", "url": "http://a.test/"}, "config.method", ""),
    ("scheme", {"url": "ftp://a.test/"}, "config.url", "http"),
    ("no-url", {"method": "GET"}, "config.url", "required"),
    ("headers-not-map", {"url": "http://a.test/", "headers": ["a"]}, "config.headers", ""),
    ("header-value-not-string", {"url": "http://a.test/", "headers": {"a": 1}}, "config.headers.a", ""),
    ("bad-header-name", {"url": "http://a.test/", "headers": {"a b": "1"}}, "config.headers", "header name 'a b'"),
    ("query-not-map", {"url": "http://a.test/", "query": "a=1"}, "config.query", ""),
    ("secrets-not-map", {"url": "http://a.test/", "secrets": ["x"]}, "config.secrets", ""),
    ("timeout", {"url": "http://a.test/", "timeout_s": 0}, "config.timeout_s", ""),
    ("timeout-bool", {"url": "http://a.test/", "timeout_s": True}, "config.timeout_s", ""),
    ("unknown-key", {"url": "http://a.test/", "verb": "GET"}, "config.verb", ""),
    ("unknown-secret", {"url": "http://a.test/${secret.nope}"}, "config.secrets", "${secret.nope}"),
    ("host-header", {"url": "http://a.test/", "headers": {"Host": "${input.h}"}}, "config.headers", "'Host'"),
    ("bad-schema", {"url": "http://a.test/", "input_schema": {"type": 5}}, "config.input_schema", ""),
]


@pytest.mark.parametrize(
    ("config", "field", "rule"), [b[1:] for b in BAD_CONFIGS], ids=[b[0] for b in BAD_CONFIGS]
)
def test_malformed_config_is_refused_on_save(config: Any, field: str, rule: str) -> None:
    with pytest.raises(InvalidConfig) as exc:
        HttpConfig.parse(config)
    assert exc.value.code == "invalid_config" and exc.value.details["field"] == field
    assert rule in exc.value.message


@pytest.mark.parametrize("value", ["..", ".", "../..", "..%2F", "a/../../admin"])
def test_dot_segments_in_inputs_stay_inside_the_path_prefix(server: str, value: str) -> None:
    """Inputs cannot climb the URL path: `..` as an input was resolved by the client and escaped `/json/`."""
    result = run_http_tool(cfg(server, "/json/${input.p}/tail"), {"p": value}, policy=POLICY)
    assert result.success, result
    (seen,) = Handler.seen
    assert seen["path"].startswith("/json/") and seen["path"].endswith("/tail")
    assert seen["path"].count("/") == 3  # /json/<one segment>/tail
