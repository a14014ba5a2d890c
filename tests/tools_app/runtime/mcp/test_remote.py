"""REMOTE servers (streamable HTTP and SSE) through the outbound guard: calls and typed failures."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from core.outbound import OutboundPolicy
from tests.fixtures.mcp_servers import HTTP_FAULTS, http_server
from tests.tools_app.runtime.mcp.conftest import Specs
from tests.waiting import scaled, wait_until
from tools_app.runtime.errors import OutboundBlocked, RemoteHTTPError, RuntimeToolError, WrongTransport
from tools_app.runtime.mcp import SessionPool
from tools_app.runtime.mcp.http import HttpChannel

SECRET = "k3y-that-must-never-leak"


KEY = {"X-Api-Key": SECRET}


@pytest.fixture(scope="module")
def streamable_url() -> Iterator[str]:
    with http_server(transport="streamable-http", extra_args=("--require-key", SECRET)) as url:
        yield url


@pytest.fixture(scope="module")
def sse_url() -> Iterator[str]:
    with http_server(transport="sse", extra_args=("--require-key", SECRET)) as url:
        yield url


@pytest.fixture(scope="module")
def faults() -> Iterator[Callable[..., str]]:
    """The URL of an HTTP_FAULTS server started with the given arguments, each started once for the module: it only
    answers every request the same way, whichever test or transport asks."""
    with ExitStack() as stack:
        urls: dict[tuple[str, ...], str] = {}

        def url(*args: str) -> str:
            if args not in urls:
                urls[args] = stack.enter_context(http_server(HTTP_FAULTS, extra_args=args))
            return urls[args]

        yield url


@pytest.mark.parametrize("transport", ["streamable_http", "sse"])
def test_remote_end_to_end(pool: SessionPool, transport: str, streamable_url: str, sse_url: str) -> None:
    url = streamable_url if transport == "streamable_http" else sse_url
    spec = Specs.remote(url, transport, headers=KEY)
    found = pool.probe(spec)
    assert found.server_name == "inventory-demo" and "get_inventory" in {f.name for f in found.functions}
    assert pool.call(spec, "get_inventory", {"sku": "DEMO-001"}).data["quantity"] == 12
    assert pool.call(spec, "get_inventory", {"sku": "DEMO-002"}).data["quantity"] == 0
    assert pool.call(spec, "get_inventory", {"sku": "X"}).data["found"] is False
    assert pool.stats()["sessions_opened"] == 1
    assert pool.call(spec, "fail", {}).error_code == "BUSINESS_ERROR"


@pytest.mark.parametrize("transport", ["streamable_http", "sse"])
def test_header_required_401_then_ok(pool: SessionPool, transport: str, streamable_url: str, sse_url: str) -> None:
    url = streamable_url if transport == "streamable_http" else sse_url
    if True:
        with pytest.raises(RemoteHTTPError) as info:
            pool.probe(Specs.remote(url, transport, headers={"X-Api-Key": "wrong-" + SECRET}))
        assert info.value.code == "remote_http_error" and info.value.details["status"] == 401
        assert SECRET not in str(info.value) and SECRET not in repr(info.value.details)
        result = pool.call(Specs.remote(url, transport, tool_id=101, headers={"X-Api-Key": "bad-" + SECRET}), "whoami", {})
        assert result.error_code == "EXECUTION_ERROR" and "401" in (result.error or "")
        assert SECRET not in (result.error or "")
        ok = Specs.remote(url, transport, tool_id=102, headers=KEY)
        assert pool.call(ok, "get_inventory", {"sku": "DEMO-001"}).success


@pytest.mark.parametrize("status", [404, 500])
@pytest.mark.parametrize("transport", ["streamable_http", "sse"])
def test_http_error_status_is_reported(pool: SessionPool, faults: Callable[..., str], status: int,
                                      transport: str) -> None:
    url = faults("--fail-status", str(status))
    with pytest.raises(RemoteHTTPError) as info:
        pool.probe(Specs.remote(url, transport, headers={"Authorization": "Bearer " + SECRET}))
    assert info.value.code == "remote_http_error" and info.value.details["status"] == status
    assert SECRET not in info.value.message


def test_wrong_transport_both_ways(pool: SessionPool, streamable_url: str, sse_url: str) -> None:
    with pytest.raises(WrongTransport):
        pool.probe(Specs.remote(sse_url, "streamable_http", headers=KEY))
    with pytest.raises(RuntimeToolError) as info:
        pool.probe(Specs.remote(streamable_url, "sse", headers=KEY))
    assert isinstance(info.value, WrongTransport | RemoteHTTPError)


@pytest.mark.parametrize("transport", ["streamable_http", "sse"])
def test_redirect_to_private_address_is_blocked(pool: SessionPool, faults: Callable[..., str], transport: str) -> None:
    url = faults("--redirect-to", "http://10.1.2.3/mcp")
    with pytest.raises(OutboundBlocked) as blocked:
        pool.probe(Specs.remote(url, transport))
    # Refused by the cross-origin redirect rule, which answers before the private-address check would.
    assert blocked.value.code == "outbound_blocked" and blocked.value.details == {"status": 307}
    assert "http://10.1.2.3/mcp" in blocked.value.message  # names the refused target


def test_metadata_address_and_loopback_blocked_without_allow(make_pool, streamable_url: str) -> None:
    strict = make_pool(policy=OutboundPolicy.build(""))
    with pytest.raises(OutboundBlocked) as metadata:
        strict.probe(Specs.remote("http://169.254.169.254/latest/meta-data"))
    assert metadata.value.code == "outbound_blocked" and metadata.value.details["address"] == "169.254.169.254"
    with pytest.raises(OutboundBlocked) as loopback:
        strict.probe(Specs.remote(streamable_url))
    assert loopback.value.code == "outbound_blocked" and loopback.value.details["address"] == "127.0.0.1"
    result = strict.call(Specs.remote(streamable_url), "whoami", {})
    assert not result.success and result.error_code == "BUSINESS_ERROR"
    assert result.meta["error_type"] == "outbound_blocked" and "127.0.0.1" in (result.error or "")  # names the address


def test_stateless_json_streamable_server_without_get_stream(pool: SessionPool) -> None:
    with http_server(extra_args=("--stateless",)) as url:  # answers the optional GET stream with 405
        spec = Specs.remote(url)
        assert pool.probe(spec).server_name == "inventory-demo"
        for _ in range(2):
            assert pool.call(spec, "get_inventory", {"sku": "DEMO-001"}).data["quantity"] == 12


# SSE: the restart ends the session's GET stream; that end is noticed while idle and the call goes to a fresh
# session before anything is sent.
@pytest.mark.parametrize("transport", ["streamable_http", "sse"])
def test_the_first_call_after_a_remote_restart_succeeds_on_a_fresh_session(pool: SessionPool, transport: str) -> None:
    from tests.fixtures.mcp_servers import free_port

    port = free_port()
    kind = "sse" if transport == "sse" else "streamable-http"
    # A 2025-only server: its sessions are what a restart loses (a 2026 one keeps none; see test_modern.py).
    legacy = ("--legacy-only",) if transport == "streamable_http" else ()
    with http_server(transport=kind, port=port, extra_args=legacy) as url:
        spec = Specs.remote(url, transport)
        assert pool.call(spec, "get_inventory", {"sku": "DEMO-001"}).success
    with http_server(transport=kind, port=port, extra_args=legacy):
        after = pool.call(spec, "get_inventory", {"sku": "DEMO-001"})
    assert after.success and after.data["quantity"] == 12, after
    assert pool.stats()["sessions_opened"] == 2


def test_an_sse_call_sent_on_a_session_that_had_already_closed_is_retried_once(pool: SessionPool) -> None:
    """The race the idle check cannot see: the stream ends between that check and the send. The SDK then
    refuses to send at all ("Connection closed" with no POST made), so the call is retried on a fresh
    session; a call that did reach the server is never repeated (see the next test)."""
    from tests.fixtures.mcp_servers import free_port

    port = free_port()
    with http_server(transport="sse", port=port) as url:
        spec = Specs.remote(url, "sse")
        assert pool.call(spec, "get_inventory", {"sku": "DEMO-001"}).success
    conn = pool._conns[spec.key]
    channel = conn._channel
    assert channel is not None and getattr(channel, "stream_ended", False)
    assert isinstance(channel, HttpChannel)
    channel.stream_ended = False  # as if the end had not been seen yet
    with http_server(transport="sse", port=port):
        after = pool.call(spec, "get_inventory", {"sku": "DEMO-002"})
    assert after.success and after.data["quantity"] == 0, after
    assert pool.stats()["sessions_opened"] == 2


def test_an_sse_call_the_server_may_have_run_is_not_repeated(pool: SessionPool, tmp_path: Path) -> None:
    """The server dies while the call runs: the POST was made, so the failure is reported, not retried."""
    from tests.fixtures.mcp_servers import free_port

    started = tmp_path / "started"
    port = free_port()
    with http_server(transport="sse", port=port) as url:
        spec = Specs.remote(url, "sse")
        assert pool.call(spec, "get_inventory", {"sku": "DEMO-001"}).success
        conn = pool._conns[spec.key]
        assert conn.session is not None
        results: list[object] = []
        worker = threading.Thread(target=lambda: results.append(
            pool.call(spec, "slow", {"seconds": 5, "started": str(started)})))
        worker.start()
        assert wait_until(started.exists), "the call never reached the server"
    worker.join(scaled(30))
    (failed,) = results
    assert not failed.success and failed.error_code == "EXECUTION_ERROR", failed  # type: ignore[attr-defined]
    assert pool.stats()["sessions_opened"] == 1
