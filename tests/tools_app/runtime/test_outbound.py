"""The outbound guard: private targets refused, and a connection goes to the address that was checked."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from core.outbound import OutboundPolicy, check_url, fetch
from tests.fixtures import echo_http
from tools_app.runtime.errors import OutboundBlocked

LOOPBACK = OutboundPolicy.build("127.0.0.0/8,::1", timeout_s=3)


@pytest.fixture
def server_port() -> Iterator[int]:
    with echo_http.echo_server() as url:
        yield int(url.rsplit(":", 1)[1])


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
