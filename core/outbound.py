"""The one outbound HTTP guard: scheme, resolved-address, redirect, size and time checks; every outbound request
goes through it."""

from __future__ import annotations

import contextvars
import functools
import ipaddress
import socket
import ssl
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin, urlsplit

import httpcore2
import httpx2
from httpcore2._utils import is_socket_readable

from core.errors import DnsFailed, OutboundBlocked, ResponseTooLarge, ToolTimeout
from core.urls import origin as origin  # re-exported: one origin rule, kept in core.urls

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

ALLOWED_SCHEMES = ("http", "https")


def parse_allow(entries: str | list[str] | tuple[str, ...]) -> tuple[IPNetwork, ...]:
    """Parse `TOOLHUB_OUTBOUND_ALLOW` (comma-separated CIDRs or addresses) into networks.

    Raises ValueError naming the bad entry (settings turn it into a startup error).
    """
    items = entries.split(",") if isinstance(entries, str) else list(entries)
    networks = []
    for item in (i.strip() for i in items):
        if not item:
            continue
        try:
            networks.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            raise ValueError(
                f"TOOLHUB_OUTBOUND_ALLOW entry {item!r} is not an IP address or CIDR network "
                "(e.g. 10.0.0.0/8, 127.0.0.1, ::1); host names are not accepted"
            ) from None
    return tuple(networks)


# -- total deadline --------------------------------------------------------------------------------
# httpx timeouts bound each network operation, so a server trickling one byte per second keeps a
# request alive forever. The deadline below bounds the whole call: every connect, read and write
# gets at most the time left, and none starts once it has passed.

_deadline: contextvars.ContextVar[float | None] = contextvars.ContextVar("outbound_deadline", default=None)


@contextmanager
def deadline(seconds: float) -> Iterator[float]:
    """Bound every outbound operation inside the block to `seconds` from now, in total.

    Nested blocks keep the earlier of the two deadlines (a refresh's budget covers all its pages).
    """
    with deadline_at(time.monotonic() + seconds) as end:
        yield end


@contextmanager
def deadline_at(end: float) -> Iterator[float]:
    """`deadline`, given as a `time.monotonic()` instant (to share one budget across several blocks)."""
    outer = _deadline.get()
    token = _deadline.set(end if outer is None else min(outer, end))
    try:
        yield end
    finally:
        _deadline.reset(token)


def _left(timeout: float | None, exc: type[Exception]) -> float | None:
    """The timeout for one network operation: the operation's own, cut to what the deadline leaves."""
    end = _deadline.get()
    if end is None:
        return timeout
    left = end - time.monotonic()
    if left <= 0:
        raise exc("outbound deadline passed")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore2.NetworkStream):
    def __init__(self, stream: httpcore2.NetworkStream) -> None:
        self._stream = stream

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, _left(timeout, httpcore2.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, _left(timeout, httpcore2.WriteTimeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore2.NetworkStream:
        return _DeadlineStream(
            self._stream.start_tls(ssl_context, server_hostname, _left(timeout, httpcore2.ConnectTimeout))
        )

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


def honours_deadline(stream: object) -> bool:
    """Whether a connection (a response's `network_stream` extension) bounds each read by the surrounding
    `deadline(...)`: those GuardedTransport opens do."""
    return isinstance(stream, _DeadlineStream)


class _DeadlineBackend(httpcore2.NetworkBackend):
    def __init__(self, backend: httpcore2.NetworkBackend) -> None:
        self._backend = backend

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.NetworkStream:
        stream = self._backend.connect_tcp(
            host, port, _left(timeout, httpcore2.ConnectTimeout), local_address, socket_options
        )
        return _DeadlineStream(stream)

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore2.NetworkStream:
        raise httpcore2.ConnectError("unix sockets are not an outbound destination")

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(seconds)


@dataclass(frozen=True)
class OutboundPolicy:
    """What one outbound request may reach and how much it may take."""

    allow: tuple[IPNetwork, ...] = ()
    max_bytes: int = 5 * 1024 * 1024
    timeout_s: float = 30.0
    max_redirects: int = 5

    @classmethod
    def build(cls, allow: str | list[str] | tuple[str, ...] = (), **kwargs: Any) -> OutboundPolicy:
        return cls(allow=parse_allow(allow), **kwargs)

    def address_allowed(self, ip: IPAddress) -> bool:
        if any(ip in net for net in self.allow):
            return True
        # Private, loopback, link-local (cloud metadata), CGNAT, multicast, reserved: all non-global.
        return ip.is_global and not ip.is_multicast


def _literal(host: str) -> IPAddress | None:
    """`host` as an address when it is written as one in its canonical form (no DNS to ask); None for a name.

    Only what `ipaddress` parses strictly: `127.1`, `2130706433` or `0x7f.1` are left to getaddrinfo, which reads
    them as the C library does, and the address it answers is checked like any other.
    """
    try:
        return ipaddress.ip_address(host.split("%")[0])  # a zone id goes, as from getaddrinfo's answers
    except ValueError:
        return None


def resolve(host: str, port: int) -> list[IPAddress]:
    """The addresses `host` stands for: an IP literal is its own answer (no lookup, which on the pool's loop
    blocked every call to a literal-IP upstream); a name is looked up every time (never cached: a name's next
    answer may differ, and the pinned address is the one checked)."""
    literal = _literal(host)
    if literal is not None:
        return [literal]
    try:
        infos = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
    except socket.gaierror as exc:
        raise DnsFailed(f"cannot resolve host {host!r}: {exc.strerror}") from None
    return [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]


def pinned_address(url: str, policy: OutboundPolicy) -> IPAddress:
    """Check `url` and return the one address to connect to (so a second DNS answer cannot differ).

    Raises OutboundBlocked unless the scheme is http(s) and every resolved address is allowed.
    """
    try:
        parts = urlsplit(url)
        explicit_port = parts.port  # ValueError for "host:99999" or "host:x"
    except ValueError as exc:
        raise OutboundBlocked(f"URL is malformed: {exc}") from None
    if parts.scheme not in ALLOWED_SCHEMES:
        raise OutboundBlocked(
            f"URL scheme {parts.scheme or '(none)'!r} is not allowed; accepted: http, https",
            details={"accepted": list(ALLOWED_SCHEMES)},
        )
    host = parts.hostname
    if not host:
        raise OutboundBlocked("URL has no host")
    port = explicit_port or (443 if parts.scheme == "https" else 80)
    addresses = resolve(host, port)
    for ip in addresses:
        if not policy.address_allowed(ip):
            raise OutboundBlocked(
                f"address {ip} of host {host!r} is private, loopback, link-local or reserved "
                "and not in TOOLHUB_OUTBOUND_ALLOW",
                details={"host": host, "address": str(ip)},
            )
    if not addresses:
        raise OutboundBlocked(f"host {host!r} resolves to no address")
    return next((ip for ip in addresses if ip.version == 4), addresses[0])


def check_url(url: str, policy: OutboundPolicy) -> None:
    """Raise OutboundBlocked unless `url` is http(s) and every address it resolves to is allowed."""
    pinned_address(url, policy)


def pin_request(request: httpx2.Request, policy: OutboundPolicy) -> httpx2.Request:
    """The request aimed at the checked address: Host header and TLS SNI keep the original name.

    Connecting by name would resolve again, and a rebinding DNS server could then answer with a
    private address that was never checked.
    """
    ip = pinned_address(str(request.url), policy)
    host = request.url.host
    if host == str(ip):
        return request
    extensions = dict(request.extensions)
    if request.url.scheme == "https":
        extensions["sni_hostname"] = host
    return httpx2.Request(
        request.method,
        request.url.copy_with(host=str(ip)),
        headers=request.headers,
        stream=request.stream,
        extensions=extensions,
    )


@dataclass
class FetchedResponse:
    status: int
    url: str
    headers: dict[str, str]
    content: bytes = field(repr=False)

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", errors="replace")

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "").split(";")[0].strip().lower()


@functools.cache
def ssl_context() -> ssl.SSLContext:
    """One CA bundle load per process (a new context per request costs ~50 ms).

    Every HTTP client the product builds passes it as `verify=` (the guarded transports by default): httpx2 builds a
    new context, loading the bundle again (~20-50 ms of CPU), for each client, transport or top-level `httpx2.post`
    without one. Same verification as that default: the default CA bundle, hostnames checked."""
    return ssl.create_default_context()


def fetch(
    method: str,
    url: str,
    *,
    policy: OutboundPolicy,
    headers: Mapping[str, str] | None = None,
    params: Mapping[str, Any] | None = None,
    content: bytes | str | None = None,
    json: Any = None,
) -> FetchedResponse:
    """Send one request through the guard, following redirects only after re-checking each target.

    `policy.timeout_s` is the deadline of the whole call (every hop, the body included), not of each
    read. A redirect to another origin carries neither the caller's headers (any of them may be a
    credential) nor cookies; one that would re-send a body there (307/308) is not followed.
    """
    timeout = httpx2.Timeout(policy.timeout_s)
    first_origin = origin(url)
    transport = GuardedTransport(policy)
    with (
        deadline(policy.timeout_s),
        httpx2.Client(timeout=timeout, follow_redirects=False, trust_env=False, transport=transport) as client,
    ):
        for _hop in range(policy.max_redirects + 1):
            try:
                request = client.build_request(
                    method, url, headers=dict(headers or {}), params=params, content=content, json=json
                )
            except (httpx2.InvalidURL, ValueError) as exc:
                raise OutboundBlocked(f"URL {_safe(url)} is malformed: {type(exc).__name__}") from None
            try:
                response = client.send(request, stream=True)
            except httpx2.TimeoutException:
                raise ToolTimeout(f"{method} {_safe(url)} timed out after {policy.timeout_s:g} s",
                                  details={"timeout_s": policy.timeout_s}) from None
            except httpx2.HTTPError as exc:
                raise OutboundBlocked(f"{method} {_safe(url)} failed: {type(exc).__name__}") from None
            try:
                if response.is_redirect and "location" in response.headers:
                    target = urljoin(url, response.headers["location"])
                    cross_origin = origin(target) != origin(url) or origin(target) != first_origin
                    keeps_body = response.status_code in (307, 308)
                    if cross_origin and keeps_body and (content is not None or json is not None):
                        raise OutboundBlocked(
                            f"{method} {_safe(url)} redirected ({response.status_code}) to another origin, "
                            f"{_safe(target)}: not followed, the request body would be re-sent there",
                            details={"status": response.status_code},
                        )
                    url, params = target, None
                    if cross_origin:
                        # Caller headers may carry credentials under any name: never to another origin.
                        headers = None
                        client.cookies.clear()
                    if not keeps_body:
                        method, content, json = "GET", None, None
                    continue
                body = _read_capped(response, policy, method, url)
                return FetchedResponse(
                    status=response.status_code,
                    url=str(response.url),
                    headers={k.lower(): v for k, v in response.headers.items()},
                    content=body,
                )
            finally:
                response.close()
        raise OutboundBlocked(f"too many redirects (more than {policy.max_redirects})")


def _read_capped(response: httpx2.Response, policy: OutboundPolicy, method: str, url: str) -> bytes:
    chunks: list[bytes] = []
    size = 0
    try:
        for chunk in response.iter_bytes():
            size += len(chunk)
            if size > policy.max_bytes:
                raise ResponseTooLarge(
                    f"response of {method} {_safe(url)} exceeds the cap of {policy.max_bytes} bytes",
                    details={"max_bytes": policy.max_bytes},
                )
            chunks.append(chunk)
    except httpx2.TimeoutException:
        raise ToolTimeout(f"{method} {_safe(url)} timed out after {policy.timeout_s:g} s",
                          details={"timeout_s": policy.timeout_s}) from None
    return b"".join(chunks)


def _safe(url: str) -> str:
    """The URL without query or userinfo, so no secret in them reaches a message."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "(malformed URL)"
    return f"{parts.scheme}://{host}{port}{parts.path}"


safe_url = _safe


class GuardedTransport(httpx2.HTTPTransport):
    """Checks every request (redirect hops included) and connects to the checked address only."""

    def __init__(self, policy: OutboundPolicy, **kwargs: Any) -> None:
        kwargs.setdefault("verify", ssl_context())  # the process's one context, as the async twin's
        super().__init__(**kwargs)
        self.policy = policy
        # Every connection this transport opens honours the surrounding `deadline(...)`.
        pool = self._pool
        pool._network_backend = _DeadlineBackend(pool._network_backend)

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        return super().handle_request(pin_request(request, self.policy))


class _SocketReadable(httpcore2.AsyncNetworkStream):
    """A connection whose `is_readable` asks its socket directly. httpcore's pool asks it of every idle connection
    before each request and again when each response closes (a readable idle socket means the server hung up), and
    anyio's stream answers by building a dict of all its socket attributes each time: about a tenth of the MCP
    session loop's CPU per REMOTE call, with a handful of idle connections per session."""

    def __init__(self, inner: httpcore2.AsyncNetworkStream) -> None:
        self._inner = inner
        self._socket = inner.get_extra_info("socket")

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return await self._inner.read(max_bytes, timeout)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        await self._inner.write(buffer, timeout)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                        timeout: float | None = None) -> httpcore2.AsyncNetworkStream:
        return _SocketReadable(await self._inner.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable" and self._socket is not None:
            return is_socket_readable(self._socket)
        return self._inner.get_extra_info(info)


class _SocketReadableBackend(httpcore2.AsyncNetworkBackend):
    def __init__(self, inner: httpcore2.AsyncNetworkBackend) -> None:
        self._inner = inner

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                          socket_options: Iterable[Any] | None = None) -> httpcore2.AsyncNetworkStream:
        return _SocketReadable(await self._inner.connect_tcp(host, port, timeout=timeout, local_address=local_address,
                                                             socket_options=socket_options))

    async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                  socket_options: Iterable[Any] | None = None) -> httpcore2.AsyncNetworkStream:
        return _SocketReadable(await self._inner.connect_unix_socket(path, timeout=timeout,
                                                                     socket_options=socket_options))

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class GuardedAsyncTransport(httpx2.AsyncHTTPTransport):
    """The async twin of GuardedTransport, for the MCP SDK's HTTP clients (they build their own requests)."""

    def __init__(self, policy: OutboundPolicy, **kwargs: Any) -> None:
        # The process's one SSL context (ssl_context()), as GuardedTransport's: httpx2's default loads the CA bundle
        # again for every transport (~20 ms of CPU), and one is built per MCP connection.
        kwargs.setdefault("verify", ssl_context())
        super().__init__(**kwargs)
        self.policy = policy
        pool = self._pool
        pool._network_backend = _SocketReadableBackend(pool._network_backend)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await super().handle_async_request(pin_request(request, self.policy))
        location = response.headers.get("location")
        if 300 <= response.status_code < 400 and location:
            target = urljoin(str(request.url), location)
            if origin(target) != origin(str(request.url)):
                # The SDK clients follow redirects themselves and would carry their headers (the
                # tool's credentials) and a 307/308 body along: another origin is never followed.
                await response.aclose()
                raise OutboundBlocked(
                    f"{request.method} {_safe(str(request.url))} redirected to another origin, "
                    f"{_safe(target)}: not followed (credentials and body stay with their origin)",
                    details={"status": response.status_code},
                )
        return response
