"""The outbound guard: private targets refused, and a connection goes to the address that was checked."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tools_app.runtime.errors import OutboundBlocked
from tools_app.runtime.outbound import OutboundPolicy, check_url, fetch

LOOPBACK = OutboundPolicy.build("127.0.0.0/8,::1", timeout_s=3)


class _Host(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802
        body = json.dumps({"host": self.headers.get("Host")}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server_port() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Host)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield int(server.server_address[1])
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize(
    "url",
    ["http://169.254.169.254/latest/meta-data", "http://10.0.0.1/", "http://[::1]/", "http://127.0.0.1:9/",
     "http://100.64.0.1/", "file:///etc/passwd", "gopher://x/"],
)
def test_private_and_odd_targets_are_refused(url: str) -> None:
    with pytest.raises(OutboundBlocked):
        check_url(url, OutboundPolicy.build(""))


def test_dns_rebinding_cannot_redirect_the_connection(server_port: int, monkeypatch: Any) -> None:
    """The first answer (checked) is loopback; any later lookup answers a private address never checked."""
    real = socket.getaddrinfo
    calls: list[str] = []

    def rebinding(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host == "rebind.test":
            calls.append(host)
            address = "127.0.0.1" if len(calls) == 1 else "10.255.255.1"
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    response = fetch("GET", f"http://rebind.test:{server_port}/x", policy=LOOPBACK)
    assert response.status == 200
    assert json.loads(response.content)["host"] == f"rebind.test:{server_port}"  # the name, not the address
    assert len(calls) == 1  # connected to the checked address: no second lookup
