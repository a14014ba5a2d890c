"""Absolute links Toolhub hands out: built on `TOOLHUB_PUBLIC_URL`, else on the request's own origin."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest


def public_base(request: HttpRequest | None = None) -> str:
    """The public origin (and path prefix) without a trailing slash; `""` when neither is known."""
    configured = str(getattr(settings, "TOOLHUB_PUBLIC_URL", "") or "").strip()
    if configured:
        return configured.rstrip("/")
    if request is not None:
        return request.build_absolute_uri("/").rstrip("/")
    return ""


def public_url(path: str, *, request: HttpRequest | None = None) -> str:
    """`path` (site-absolute, e.g. `/oauth/callback/`) as an absolute URL a browser elsewhere can open."""
    return public_base(request) + "/" + path.lstrip("/")
