"""The one outbound HTTP guard: scheme, resolved-address, redirect, size and time checks (DESIGN §5)."""

from __future__ import annotations

import functools
import ipaddress
import socket
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin, urlsplit

import httpx2

from core.errors import DnsFailed, OutboundBlocked, ResponseTooLarge, ToolTimeout

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

ALLOWED_SCHEMES = ("http", "https")


def parse_allow(entries: str | list[str] | tuple[str, ...]) -> tuple[IPNetwork, ...]:
    """Parse `TOOLHUB_OUTBOUND_ALLOW` (comma-separated CIDRs or addresses) into networks."""
    items = entries.split(",") if isinstance(entries, str) else list(entries)
    return tuple(ipaddress.ip_network(item.strip(), strict=False) for item in items if item.strip())


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


def resolve(host: str, port: int) -> list[IPAddress]:
    try:
        infos = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
    except socket.gaierror as exc:
        raise DnsFailed(f"cannot resolve host {host!r}: {exc.strerror}") from None
    return [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]


def pinned_address(url: str, policy: OutboundPolicy) -> IPAddress:
    """Check `url` and return the one address to connect to (so a second DNS answer cannot differ).

    Raises OutboundBlocked unless the scheme is http(s) and every resolved address is allowed.
    """
    parts = urlsplit(url)
    if parts.scheme not in ALLOWED_SCHEMES:
        raise OutboundBlocked(
            f"URL scheme {parts.scheme or '(none)'!r} is not allowed; accepted: http, https",
            details={"accepted": list(ALLOWED_SCHEMES)},
        )
    host = parts.hostname
    if not host:
        raise OutboundBlocked("URL has no host")
    port = parts.port or (443 if parts.scheme == "https" else 80)
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
    """One CA bundle load per process (a new context per request costs ~50 ms)."""
    return ssl.create_default_context()


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    return parts.scheme, (parts.hostname or "").lower(), parts.port


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
    """Send one request through the guard, following redirects only after re-checking each target."""
    timeout = httpx2.Timeout(policy.timeout_s)
    first_origin = _origin(url)
    transport = GuardedTransport(policy, verify=ssl_context())
    with httpx2.Client(timeout=timeout, follow_redirects=False, trust_env=False, transport=transport) as client:
        for _hop in range(policy.max_redirects + 1):
            request = client.build_request(
                method, url, headers=dict(headers or {}), params=params, content=content, json=json
            )
            try:
                response = client.send(request, stream=True)
            except httpx2.TimeoutException:
                raise ToolTimeout(f"{method} {_safe(url)} timed out after {policy.timeout_s:g} s") from None
            except httpx2.HTTPError as exc:
                raise OutboundBlocked(f"{method} {_safe(url)} failed: {type(exc).__name__}") from None
            try:
                if response.is_redirect and "location" in response.headers:
                    url = urljoin(url, response.headers["location"])
                    params = None
                    if _origin(url) != first_origin:
                        # Caller headers may carry credentials under any name: never to another origin.
                        headers = None
                    if response.status_code in (301, 302, 303):
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
        raise ToolTimeout(f"{method} {_safe(url)} timed out after {policy.timeout_s:g} s") from None
    return b"".join(chunks)


def _safe(url: str) -> str:
    """The URL without query or userinfo, so no secret in them reaches a message."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path}"


safe_url = _safe


class GuardedTransport(httpx2.HTTPTransport):
    """Checks every request (redirect hops included) and connects to the checked address only."""

    def __init__(self, policy: OutboundPolicy, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.policy = policy

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        return super().handle_request(pin_request(request, self.policy))


class GuardedAsyncTransport(httpx2.AsyncHTTPTransport):
    """The async twin of GuardedTransport, for the MCP SDK's HTTP clients (they build their own requests)."""

    def __init__(self, policy: OutboundPolicy, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.policy = policy

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        return await super().handle_async_request(pin_request(request, self.policy))
