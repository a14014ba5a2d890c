"""The outbound guard: private targets refused, and a connection goes to the address that was checked."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest

from core.outbound import OutboundPolicy, check_url, fetch, pinned_address
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


def _lookups(monkeypatch: Any) -> list[str]:
    """Every host socket.getaddrinfo is asked about from now on (the real lookup still answers)."""
    real = socket.getaddrinfo
    asked: list[str] = []

    def counted(host: Any, *args: Any, **kwargs: Any) -> Any:
        asked.append(str(host))
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", counted)
    return asked


def test_an_ip_literal_is_its_own_answer_no_lookup(monkeypatch: Any) -> None:
    asked = _lookups(monkeypatch)
    for _ in range(3):
        assert str(pinned_address("http://127.0.0.1:8080/mcp", LOOPBACK)) == "127.0.0.1"
        assert str(pinned_address("http://[::1]:8080/mcp", LOOPBACK)) == "::1"
    assert asked == []  # every request of a warm gateway call to a literal-IP upstream made one lookup before


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest/meta-data",
        "http://10.0.0.1/",
        "http://[::1]/",
        "http://[::ffff:127.0.0.1]/",
        "http://[fe80::1%25eth0]/",
    ],
)
def test_a_forbidden_literal_is_still_refused_without_a_lookup(url: str, monkeypatch: Any) -> None:
    asked = _lookups(monkeypatch)
    with pytest.raises(OutboundBlocked, match="private, loopback, link-local or reserved"):
        check_url(url, OutboundPolicy.build(""))
    assert asked == []


@pytest.mark.parametrize("host", ["127.1", "2130706433", "0x7f.0.0.1"])
def test_a_loose_numeric_host_is_read_by_the_resolver_and_checked(host: str, monkeypatch: Any) -> None:
    """Only canonical literals skip the lookup; the C library's other spellings of 127.0.0.1 are resolved and refused."""
    asked = _lookups(monkeypatch)
    with pytest.raises(OutboundBlocked, match="127.0.0.1"):
        check_url(f"http://{host}/", OutboundPolicy.build(""))
    assert asked == [host]


def test_a_name_is_looked_up_and_checked_on_every_request(monkeypatch: Any) -> None:
    """No answer for a name is kept: the next request's lookup may answer a forbidden address, and is refused."""
    answers = iter(["127.0.0.1", "127.0.0.1", "10.255.255.1"])
    asked: list[str] = []

    def rebinding(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        asked.append(host)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (next(answers), port))]

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    assert str(pinned_address("http://upstream.test:8080/mcp", LOOPBACK)) == "127.0.0.1"
    assert str(pinned_address("http://upstream.test:8080/mcp", LOOPBACK)) == "127.0.0.1"
    with pytest.raises(OutboundBlocked, match="10.255.255.1"):
        pinned_address("http://upstream.test:8080/mcp", LOOPBACK)
    assert asked == ["upstream.test"] * 3


def test_every_http_client_the_product_builds_shares_the_one_tls_context(monkeypatch: Any) -> None:
    """httpx2 builds a new SSLContext, loading the CA bundle (~20-50 ms of CPU), for each client, transport or
    top-level `httpx2.post` not given one: the product's clients take the process's one (core.outbound)."""
    import ssl

    import httpcore2

    from agents_app.runtime.model_client import _new_http_client
    from core.outbound import GuardedAsyncTransport, GuardedTransport, ssl_context
    from tools_app.runtime.mcp.http import HttpChannel, _client_factory
    from tools_app.runtime.mcp.pool import SessionPool
    from tools_app.runtime.runner.client import RunnerPool
    from tools_app.services.audit_stream import HttpSink, SinkError

    ssl_context()  # the one load, before counting
    built: list[str] = []

    def counted(name: str, real: Any) -> Any:
        def build(*args: Any, **kwargs: Any) -> ssl.SSLContext:
            built.append(name)
            return real(*args, **kwargs)
        return build

    for module, name in ((httpcore2, "default_ssl_context"), (ssl, "create_default_context")):
        monkeypatch.setattr(module, name, counted(name, getattr(module, name)))

    closing = [
        RunnerPool(SessionPool(policy=LOOPBACK), None, "secret").client,  # type: ignore[arg-type]
        _new_http_client(),
        httpx2.Client(transport=GuardedTransport(LOOPBACK)),
    ]
    for client in closing:
        client.close()
    GuardedAsyncTransport(LOOPBACK)
    _client_factory(LOOPBACK, HttpChannel(url="http://127.0.0.1:9/"), 5, optional_get=False)()
    with pytest.raises(SinkError):  # nobody listens there; the client (and any context) is built before connecting
        HttpSink("http://127.0.0.1:9/audit").send([json.dumps({"metadata": {"sequence": 1}})])
    assert built == []
