"""The outbound guard's total deadline and cross-origin redirect rules, against real loopback servers.

Redirects and time limits of the outbound guard: a 307/308 to another origin re-sent the body and credentials; timeouts
bounded each read, so a server trickling one byte per second held a 3 s call open for 20 s.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from core.outbound import OutboundPolicy, deadline, fetch
from tests.waiting import scaled
from tools_app.configs import HttpConfig
from tools_app.runtime import http_tool
from tools_app.runtime.errors import OutboundBlocked, ToolTimeout

LOOPBACK = OutboundPolicy.build("127.0.0.0/8", timeout_s=30)


def run_http_tool(config: dict[str, Any], arguments: dict[str, Any], **kw: Any) -> Any:
    """The HTTP tool as the runtime takes it: a config validated on save (HttpConfig)."""
    return http_tool.run_http_tool(HttpConfig.parse(config), arguments, **kw)
TRICKLE_TOTAL = 200  # bytes the trickling server would send at one per TRICKLE_GAP_S


@dataclass
class Trickle:
    """What the trickling server managed to send before the client went away."""

    gap_s: float
    in_headers: bool = False
    sent: int = 0
    disconnected: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)


def _trickle_handler(state: Trickle) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _drip(self, data: bytes) -> None:
            for i in range(len(data)):
                self.wfile.write(data[i : i + 1])
                self.wfile.flush()
                state.sent += 1
                time.sleep(state.gap_s)

        def do_GET(self) -> None:
            head = (
                f"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {TRICKLE_TOTAL}\r\n\r\n"
            ).encode()
            try:
                if state.in_headers:
                    self._drip(head)
                else:
                    self.wfile.write(head)
                    self.wfile.flush()
                self._drip(b"x" * TRICKLE_TOTAL)
            except (BrokenPipeError, ConnectionResetError):
                state.disconnected.set()
            finally:
                state.done.set()

        do_POST = do_GET

    return Handler


@pytest.fixture
def trickle() -> Iterator[tuple[str, Trickle]]:
    state = Trickle(gap_s=0.25)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _trickle_handler(state))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", state
    finally:
        server.shutdown()
        server.server_close()


def _assert_cut_short(state: Trickle) -> None:
    # The server notices the closed connection on its next write.
    assert state.done.wait(scaled(10)), "the server never finished: the client kept the connection open"
    assert state.disconnected.is_set()
    assert state.sent < TRICKLE_TOTAL // 2


def test_http_tool_timeout_is_a_total_deadline_not_per_read(trickle: tuple[str, Trickle]) -> None:
    url, state = trickle
    result = run_http_tool({"method": "GET", "url": f"{url}/slow", "timeout_s": 1}, {}, policy=LOOPBACK)
    assert not result.success
    assert result.error_code == "TIMEOUT"
    _assert_cut_short(state)  # every read returned in 0.25 s: only a total deadline stops the trickle early


def test_trickled_headers_hit_the_deadline_too(trickle: tuple[str, Trickle]) -> None:
    url, state = trickle
    state.in_headers = True
    with pytest.raises(ToolTimeout):
        fetch("GET", f"{url}/slow", policy=OutboundPolicy.build("127.0.0.0/8", timeout_s=1))
    _assert_cut_short(state)


def test_an_outer_deadline_bounds_several_calls(trickle: tuple[str, Trickle]) -> None:
    """A market refresh's budget covers all its pages: the outer deadline wins over each call's own."""
    url, state = trickle
    with deadline(0.75), pytest.raises(ToolTimeout):
        fetch("GET", f"{url}/slow", policy=LOOPBACK)  # 30 s of its own
    _assert_cut_short(state)


# -- redirects -------------------------------------------------------------------------------------


@dataclass
class Seen:
    requests: list[dict[str, Any]] = field(default_factory=list)


def _recording_handler(seen: Seen, redirect_to: str | None, status: int) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _handle(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length).decode() if length else ""
            seen.requests.append(
                {"method": self.command, "path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()},
                 "body": body}
            )
            if redirect_to is not None and not self.path.startswith("/final"):
                self.send_response(status)
                self.send_header("Location", redirect_to)
                self.send_header("Set-Cookie", "session=from-a; Path=/")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            out = json.dumps({"ok": True}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        do_GET = do_POST = do_PUT = _handle

    return Handler


def _serve(handler: type[BaseHTTPRequestHandler]) -> tuple[ThreadingHTTPServer, int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return server, server.server_address[1]


@pytest.fixture
def two_origins() -> Iterator[Any]:
    """start(status, same_origin) -> (url of A, what A saw, what the redirect target saw)."""
    servers: list[ThreadingHTTPServer] = []

    def start(status: int, same_origin: bool) -> tuple[str, Seen, Seen]:
        seen_a, seen_b = Seen(), Seen()
        if same_origin:
            # Reserve a port for A first, so A can redirect to its own /final path.
            with socket.socket() as probe:
                probe.bind(("127.0.0.1", 0))
                port = probe.getsockname()[1]
            server = ThreadingHTTPServer(
                ("127.0.0.1", port), _recording_handler(seen_a, f"http://127.0.0.1:{port}/final", status)
            )
            threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
            servers.append(server)
            return f"http://127.0.0.1:{port}/start", seen_a, seen_a
        server_b, port_b = _serve(_recording_handler(seen_b, None, 200))
        server_a, port_a = _serve(_recording_handler(seen_a, f"http://127.0.0.1:{port_b}/final", status))
        servers.extend([server_a, server_b])
        return f"http://127.0.0.1:{port_a}/start", seen_a, seen_b

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


CREDENTIALS = {"Authorization": "Bearer top-secret", "X-Api-Key": "key-123", "Cookie": "sid=abc"}


@pytest.mark.parametrize("status", [307, 308])
def test_cross_origin_307_308_with_a_body_is_not_followed(two_origins: Any, status: int) -> None:
    url, seen_a, seen_b = two_origins(status, same_origin=False)
    with pytest.raises(OutboundBlocked) as refused:
        fetch("POST", url, policy=LOOPBACK, headers=CREDENTIALS, json={"payload": "private"})
    assert refused.value.code == "outbound_blocked" and refused.value.details == {"status": status}
    assert len(seen_a.requests) == 1
    assert seen_b.requests == []  # neither the body nor the credentials reached the other origin


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_cross_origin_redirect_drops_credentials(two_origins: Any, status: int) -> None:
    url, seen_a, seen_b = two_origins(status, same_origin=False)
    response = fetch("GET", url, policy=LOOPBACK, headers=CREDENTIALS)
    assert response.status == 200
    assert seen_a.requests[0]["headers"]["authorization"] == "Bearer top-secret"
    (arrived,) = seen_b.requests
    for name in ("authorization", "x-api-key", "cookie"):
        assert name not in arrived["headers"], name


@pytest.mark.parametrize("status", [301, 302, 303])
def test_cross_origin_post_redirect_becomes_get_without_body(two_origins: Any, status: int) -> None:
    url, _, seen_b = two_origins(status, same_origin=False)
    fetch("POST", url, policy=LOOPBACK, headers=CREDENTIALS, json={"payload": "private"})
    (arrived,) = seen_b.requests
    assert arrived["method"] == "GET"
    assert arrived["body"] == ""
    assert "authorization" not in arrived["headers"]


@pytest.mark.parametrize("status", [307, 308])
def test_same_origin_307_308_keeps_body_and_credentials(two_origins: Any, status: int) -> None:
    url, seen, _ = two_origins(status, same_origin=True)
    response = fetch("POST", url, policy=LOOPBACK, headers=CREDENTIALS, json={"payload": "private"})
    assert response.status == 200
    first, second = seen.requests
    assert second["path"] == "/final"
    assert second["method"] == "POST"
    assert json.loads(second["body"]) == {"payload": "private"}
    assert second["headers"]["authorization"] == "Bearer top-secret"
    assert second["headers"]["x-api-key"] == "key-123"


def test_http_tool_cross_origin_307_keeps_the_secret_home(two_origins: Any) -> None:
    url, _, seen_b = two_origins(307, same_origin=False)
    config = {
        "method": "POST",
        "url": url,
        "headers": {"X-Api-Key": "${secret.key}"},
        "secrets": {"key": "key-123-secret"},
        "body": {"q": "${input.q}"},
    }
    result = run_http_tool(config, {"q": "hello"}, policy=LOOPBACK)
    assert not result.success and result.error_code == "BUSINESS_ERROR"  # OutboundBlocked's result family
    assert "another origin" in (result.error or "")  # a call result has no details: its text names the rule
    assert seen_b.requests == []
