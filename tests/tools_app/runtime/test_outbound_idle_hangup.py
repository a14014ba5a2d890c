"""The async guard's pooled connections (core.outbound.GuardedAsyncTransport, the MCP SDK's HTTP clients): an idle
keep-alive connection the server has closed is seen as closed before it is reused, so the next request goes out on a
new connection instead of failing. Its readability is asked of the socket itself (core.outbound._SocketReadable)."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest

from core.outbound import GuardedAsyncTransport, OutboundPolicy, _SocketReadable

LOOPBACK = OutboundPolicy.build("127.0.0.0/8,::1", timeout_s=3)


@pytest.fixture
def hanging_up() -> Iterator[tuple[str, threading.Event, threading.Event]]:
    """A server that answers one request per connection (keep-alive, as far as the client knows), then closes it
    once told to (the first event); the second is set once it has closed one."""
    listener = socket.create_server(("127.0.0.1", 0))
    hang_up, closed = threading.Event(), threading.Event()
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(4096)
                    if not chunk:
                        break
                    data += chunk
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: text/plain\r\n\r\nok")
                hang_up.wait(5)
            closed.set()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/", hang_up, closed
    finally:
        stop.set()
        hang_up.set()
        thread.join(5)
        listener.close()


def test_an_idle_connection_the_server_closed_is_not_reused(
    hanging_up: tuple[str, threading.Event, threading.Event],
) -> None:
    url, hang_up, closed = hanging_up

    async def twice() -> list[str]:
        transport = GuardedAsyncTransport(LOOPBACK)
        async with httpx2.AsyncClient(transport=transport) as client:
            first = await client.get(url)
            pooled: list[Any] = list(transport._pool._connections)
            streams = [conn._connection._network_stream for conn in pooled if conn._connection is not None]
            assert streams and all(isinstance(stream, _SocketReadable) for stream in streams)
            assert not any(stream.get_extra_info("is_readable") for stream in streams)  # idle and open
            hang_up.set()
            assert closed.wait(5)
            await asyncio.sleep(0.05)  # the server's FIN has reached this side
            assert all(stream.get_extra_info("is_readable") for stream in streams)
            second = await client.get(url)
            return [first.text, second.text]

    assert asyncio.run(twice()) == ["ok", "ok"]


def test_an_open_idle_connection_is_not_readable() -> None:
    server = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def accept() -> None:
        conn, _ = server.accept()
        held.append(conn)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()

    async def check() -> bool:
        transport = GuardedAsyncTransport(LOOPBACK)
        stream = await transport._pool._network_backend.connect_tcp("127.0.0.1", server.getsockname()[1])
        try:
            assert isinstance(stream, _SocketReadable)
            return bool(stream.get_extra_info("is_readable"))
        finally:
            await stream.aclose()

    try:
        assert asyncio.run(check()) is False
    finally:
        thread.join(5)
        for conn in held:
            conn.close()
        server.close()
