"""The origin rule: which URLs are the same site (scheme, host, port), in one place.

Secrets follow their origin (core.secrets: a config whose URL moves to another origin must supply its kept
secrets again) and redirects may not carry credentials across origins (core.outbound); both compare with this.
Django-free.
"""

from __future__ import annotations

from urllib.parse import urlsplit

_DEFAULT_PORTS = {"http": 80, "https": 443}


def origin(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) of a URL: scheme and host lower-cased, the port defaulted by scheme (None when the
    scheme has no default). A URL that cannot be parsed is its own origin, equal to no real one."""
    try:
        parts = urlsplit(url.strip())
        scheme = parts.scheme.lower()
        host = (parts.hostname or "").lower()
        try:
            port = parts.port
        except ValueError:
            return "", url, None
        return scheme, host, port if port is not None else _DEFAULT_PORTS.get(scheme)
    except ValueError:
        return "", url, None


def same_origin(a: str, b: str) -> bool:
    return origin(a) == origin(b)
