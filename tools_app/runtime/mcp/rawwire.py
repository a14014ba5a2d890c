"""A small blocking HTTP/1.1 client for one MCP endpoint: kept-alive sockets, one POST per exchange (rawpost.py).

Only what an MCP POST needs: the request written in one `sendall`, the response head parsed, the body read by
Content-Length, chunked transfer coding or to EOF, gzip/deflate decoded (the request offers them, as httpx does).
Every connection goes to the address the outbound policy pins for the URL at that moment, checked per request as
`core.outbound.GuardedAsyncTransport` checks it; a kept-alive socket the server closed while idle (readable before
reuse) is discarded before anything is sent on it.
"""

from __future__ import annotations

import socket
import threading
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit

from httpcore2._utils import is_socket_readable
from httpx2._client import USER_AGENT as httpx2_user_agent

from core.outbound import OutboundPolicy, pinned_address

CHUNK = 65536
MAX_HEAD = 64 * 1024
# Idle sockets kept per endpoint: one per worker thread that called at once, bounded.
MAX_IDLE = 8
# httpx2's own default request headers, in its order (the wire must not tell the two paths apart).
USER_AGENT = httpx2_user_agent


class WireClosed(Exception):
    """The peer closed (or reset) the connection before the response was complete."""


class NotSent(Exception):
    """The request could not be sent (no connection, refused by the policy): nothing reached the server."""


@dataclass
class Head:
    status: int
    headers: dict[str, str]  # lower-cased names; repeated headers joined with ", "
    keep_alive: bool


class _Socket:
    """One connected socket and its unread bytes."""

    def __init__(self, sock: socket.socket, address: tuple[str, int]) -> None:
        self.sock = sock
        self.address = address
        self.buf = bytearray()

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


class Exchange:
    """One request's response on one socket: head, then body chunks (decoded); gives the socket back when whole."""

    def __init__(self, endpoint: Endpoint, conn: _Socket, deadline: float) -> None:
        self.endpoint = endpoint
        self.conn = conn
        self.deadline = deadline
        self.head: Head | None = None
        self._done = False  # the body was read to its end
        self._finished = False  # the socket was given back or closed
        self._decoder: zlib._Decompress | None = None
        self._body: Iterator[bytes] | None = None  # the raw body's reader, continued by finish()

    def _recv(self) -> bytes:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the call's deadline passed")
        self.conn.sock.settimeout(left)
        try:
            data = self.conn.sock.recv(CHUNK)
        except TimeoutError:
            raise TimeoutError("the call's deadline passed") from None
        except OSError as exc:
            raise WireClosed(type(exc).__name__) from None
        if not data:
            raise WireClosed("EOF")
        return data

    def _line(self) -> bytes:
        buf = self.conn.buf
        while True:
            end = buf.find(b"\r\n")
            if end >= 0:
                line = bytes(buf[:end])
                del buf[:end + 2]
                return line
            if len(buf) > MAX_HEAD:
                raise WireClosed("response head too long")
            buf += self._recv()

    def read_head(self) -> Head:
        buf = self.conn.buf
        while b"\r\n\r\n" not in buf:
            if len(buf) > MAX_HEAD:
                raise WireClosed("response head too long")
            buf += self._recv()
        status_line = self._line().decode("latin-1")
        version, _, rest = status_line.partition(" ")
        if not version.startswith("HTTP/") or not rest[:3].isdigit():
            raise WireClosed("not an HTTP response")
        status = int(rest[:3])
        headers: dict[str, str] = {}
        while line := self._line():
            name, _, value = line.decode("latin-1").partition(":")
            key, value = name.strip().lower(), value.strip()
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
        keep_alive = version == "HTTP/1.1" and "close" not in headers.get("connection", "").lower()
        encoding = headers.get("content-encoding", "").lower()
        if encoding in ("gzip", "x-gzip"):
            self._decoder = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif encoding == "deflate":
            self._decoder = zlib.decompressobj()
        self.head = Head(status, headers, keep_alive)
        return self.head

    def chunks(self) -> Iterator[bytes]:
        """The body, decoded, as it arrives (WireClosed for a body that is not what its head says)."""
        if self._body is None:
            self._body = self._raw_chunks()
        try:
            for raw in self._body:
                data = self._decoder.decompress(raw) if self._decoder is not None else raw
                if data:
                    yield data
        except (ValueError, zlib.error) as exc:
            raise WireClosed(type(exc).__name__) from None
        self._done = True

    def read_body(self) -> bytes:
        return b"".join(self.chunks())

    def _raw_chunks(self) -> Iterator[bytes]:
        head = self.head
        assert head is not None
        if head.status in (204, 304) or 100 <= head.status < 200:
            return
        if "chunked" in head.headers.get("transfer-encoding", "").lower():
            yield from self._chunked()
            return
        length = head.headers.get("content-length")
        if length is not None:
            yield from self._sized(int(length))
            return
        head.keep_alive = False  # delimited by EOF
        yield from self._until_eof()

    def _sized(self, left: int) -> Iterator[bytes]:
        buf = self.conn.buf
        while left > 0:
            if not buf:
                buf += self._recv()
            piece = bytes(buf[:left])
            del buf[:len(piece)]
            left -= len(piece)
            yield piece

    def _chunked(self) -> Iterator[bytes]:
        while True:
            size = int(self._line().split(b";", 1)[0].strip(), 16)  # ValueError: chunks() makes it WireClosed
            if size == 0:
                while self._line():  # trailers, up to the blank line
                    pass
                return
            yield from self._sized(size)
            self._line()  # the CRLF after the chunk

    def _until_eof(self) -> Iterator[bytes]:
        buf = self.conn.buf
        if buf:
            yield bytes(buf)
            buf.clear()
        while True:
            try:
                yield self._recv()
            except WireClosed:
                return

    def finish(self, wait_s: float = 0.0) -> None:
        """Done with the response: the socket goes back to the endpoint when its body was read to the end (what is
        left of it is read for at most `wait_s`: an SSE stream ends just after its answer), else it is closed. Once."""
        if self._finished:
            return
        self._finished = True
        head = self.head
        if head is not None and not self._done and head.keep_alive:
            self.deadline = min(self.deadline, time.monotonic() + wait_s)
            try:
                for _ in self.chunks():
                    pass
            except (WireClosed, TimeoutError):
                self._done = False
        self.endpoint.give_back(self.conn, reuse=head is not None and head.keep_alive and self._done)


class Endpoint:
    """One URL's kept-alive sockets, shared by every thread calling it; the host's address pinned per request."""

    def __init__(self, url: str, policy: OutboundPolicy, headers: tuple[tuple[str, str], ...]) -> None:
        parts = urlsplit(url)
        self.url = url
        self.policy = policy
        self.port = parts.port or 80
        host = parts.netloc.rsplit("@", 1)[-1]
        self.target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        # httpx2's header order: its defaults, the client's (the tool's configured headers), then the request's.
        self._base: list[tuple[str, str]] = [("Host", host), ("Accept", "*/*"), ("Accept-Encoding", "gzip, deflate"),
                                             ("Connection", "keep-alive"), ("User-Agent", USER_AGENT)]
        self._base = _merged(self._base, list(headers))
        self._lock = threading.Lock()
        self._idle: list[_Socket] = []
        self._closed = False

    @staticmethod
    def usable(url: str) -> bool:
        """Plain http only: an https upstream keeps the async path (its TLS verification is httpx's)."""
        return urlsplit(url).scheme == "http"

    def head_bytes(self, headers: list[tuple[str, str]], body: bytes) -> bytes:
        merged = _merged(self._base, headers)
        merged.append(("Content-Length", str(len(body))))
        lines = [f"POST {self.target} HTTP/1.1"] + [f"{name}: {value}" for name, value in merged]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    def post(self, headers: list[tuple[str, str]], body: bytes, deadline: float) -> Exchange:
        """Send one POST; raises NotSent if nothing could be sent, WireClosed/TimeoutError after that."""
        conn = self._take(deadline)
        data = self.head_bytes(headers, body) + body
        left = deadline - time.monotonic()
        try:
            conn.sock.settimeout(max(left, 0.001))
            conn.sock.sendall(data)
        except OSError as exc:
            conn.close()
            raise WireClosed(type(exc).__name__) from None
        return Exchange(self, conn, deadline)

    def _take(self, deadline: float) -> _Socket:
        try:
            ip = str(pinned_address(self.url, self.policy))
        except Exception as exc:  # noqa: BLE001 - the async path reports the refusal itself
            raise NotSent(type(exc).__name__) from None
        address = (ip, self.port)
        stale: list[_Socket] = []
        found: _Socket | None = None
        with self._lock:
            if self._closed:
                raise NotSent("closed")
            while self._idle:
                candidate = self._idle.pop()
                if candidate.address == address and not candidate.buf and not is_socket_readable(candidate.sock):
                    found = candidate
                    break
                stale.append(candidate)  # the server hung up (or sent unasked bytes), or the name moved
        for conn in stale:
            conn.close()
        if found is not None:
            return found
        left = deadline - time.monotonic()
        try:
            sock = socket.create_connection(address, timeout=max(left, 0.001))
        except OSError as exc:
            raise NotSent(type(exc).__name__) from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return _Socket(sock, address)

    def give_back(self, conn: _Socket, *, reuse: bool) -> None:
        with self._lock:
            if reuse and not self._closed and len(self._idle) < MAX_IDLE:
                self._idle.append(conn)
                return
        conn.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


def _merged(base: list[tuple[str, str]], extra: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """httpx2's merge: a header named again (any case) leaves its place and goes to the end with its new value."""
    out = list(base)
    for name, value in extra:
        lower = name.lower()
        out = [(n, v) for n, v in out if n.lower() != lower]
        out.append((name, value))
    return out
