"""rawwire's blocking HTTP/1.1 client against a real socket server on loopback that answers what MCP servers seldom
do but may: a gzip body in chunks, a body delimited by the connection's end, a kept-alive socket closed while idle."""

from __future__ import annotations

import gzip
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from core.outbound import OutboundPolicy
from tools_app.runtime.mcp.rawwire import Endpoint, NotSent

LOOPBACK = OutboundPolicy.build("127.0.0.0/8")


class Server:
    """Answers each request with the next canned answer; counts connections and requests; `close_idle` hangs up
    after answering (the client's socket is then readable at EOF while it sits idle)."""

    def __init__(self, answers: list[bytes], *, close_idle: bool = False) -> None:
        self.answers = answers
        self.close_idle = close_idle
        self.connections = 0
        self.requests: list[bytes] = []
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        buf = b""
        with conn:
            while self.answers:
                while b"\r\n\r\n" not in buf:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buf += data
                head, _, rest = buf.partition(b"\r\n\r\n")
                length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                                  if line.lower().startswith(b"content-length")))
                while len(rest) < length:
                    rest += conn.recv(65536)
                self.requests.append(head + b"\r\n\r\n" + rest[:length])
                buf = rest[length:]
                conn.sendall(self.answers.pop(0))
                if self.close_idle:
                    return


@pytest.fixture
def endpoint_for() -> Iterator[Any]:
    made: list[Endpoint] = []

    def make(server: Server, headers: tuple[tuple[str, str], ...] = ()) -> Endpoint:
        endpoint = Endpoint(f"http://127.0.0.1:{server.port}/mcp", LOOPBACK, headers)
        made.append(endpoint)
        return endpoint

    yield make
    for endpoint in made:
        endpoint.close()


def _chunked(body: bytes, size: int = 7) -> bytes:
    out = b"".join(b"%x\r\n%s\r\n" % (len(body[i:i + size]), body[i:i + size]) for i in range(0, len(body), size))
    return out + b"0\r\n\r\n"


def test_a_gzip_body_in_chunks_is_decoded_and_the_socket_kept(endpoint_for: Any) -> None:
    body = gzip.compress(b'{"jsonrpc":"2.0","id":1,"result":{}}')
    answer = (b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-encoding: gzip\r\n"
              b"transfer-encoding: chunked\r\n\r\n" + _chunked(body))
    server = Server([answer, answer])
    endpoint = endpoint_for(server, (("X-Api-Key", "k"),))
    for _ in range(2):
        exchange = endpoint.post([("accept", "application/json")], b"{}", time.monotonic() + 5)
        assert exchange.read_head().status == 200
        assert exchange.read_body() == b'{"jsonrpc":"2.0","id":1,"result":{}}'
        exchange.finish()
    assert server.connections == 1 and len(server.requests) == 2  # one kept-alive socket
    first = server.requests[0].decode()
    assert first.startswith("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:")
    names = [line.split(":")[0] for line in first.split("\r\n\r\n")[0].split("\r\n")[1:]]
    assert names == ["Host", "Accept-Encoding", "Connection", "User-Agent", "X-Api-Key", "accept", "Content-Length"]


def test_a_body_delimited_by_the_connections_end_is_read_whole_and_the_socket_not_kept(endpoint_for: Any) -> None:
    server = Server([b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n{\"a\": 1}",
                     b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}"], close_idle=True)
    endpoint = endpoint_for(server)
    exchange = endpoint.post([], b"{}", time.monotonic() + 5)
    exchange.read_head()
    assert exchange.read_body() == b'{"a": 1}'
    exchange.finish()
    assert endpoint._idle == []


def test_a_kept_alive_socket_the_server_closed_is_left_before_sending(endpoint_for: Any) -> None:
    answer = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}"
    server = Server([answer, answer], close_idle=True)  # it hangs up after each answer, keep-alive or not
    endpoint = endpoint_for(server)
    exchange = endpoint.post([], b"{}", time.monotonic() + 5)
    exchange.read_head()
    exchange.read_body()
    exchange.finish()
    assert len(endpoint._idle) == 1  # kept: the answer said nothing of closing
    idle = endpoint._idle[0]
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not _readable(idle.sock):
        time.sleep(0.01)
    second = endpoint.post([], b"{}", time.monotonic() + 5)  # on a new connection, sent once
    second.read_head()
    assert second.read_body() == b"{}"
    assert server.connections == 2 and len(server.requests) == 2


def test_nothing_is_sent_where_the_outbound_policy_refuses(endpoint_for: Any) -> None:
    server = Server([])
    endpoint = Endpoint(f"http://127.0.0.1:{server.port}/mcp", OutboundPolicy.build(""), ())
    with pytest.raises(NotSent):
        endpoint.post([], b"{}", time.monotonic() + 5)
    assert server.connections == 0


def _readable(sock: socket.socket) -> bool:
    from httpcore2._utils import is_socket_readable

    return is_socket_readable(sock)
