"""CORS for the authorization server's machine endpoints, so a browser-based MCP client (the Inspector's web UI, a
web app) can discover, register and exchange tokens without a proxy.

Only what a public client calls from script: the discovery documents, registration, token and revocation. None
reads a cookie (public clients, tokens in the body), so any origin may call them and no credentials are allowed;
the authorization endpoint is a page the browser navigates to and stays without CORS.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.http import HttpRequest, HttpResponse

ALLOWED_HEADERS = "Authorization, Content-Type, MCP-Protocol-Version"
MAX_AGE_S = 600


def open_to_browsers(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Answer a preflight itself and mark every answer readable from any origin (never with credentials)."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if request.method == "OPTIONS" and request.headers.get("Access-Control-Request-Method"):
            response = HttpResponse(status=204)
            response["Access-Control-Allow-Methods"] = "GET, POST, PUT, DELETE, OPTIONS"
            response["Access-Control-Allow-Headers"] = ALLOWED_HEADERS
            response["Access-Control-Max-Age"] = str(MAX_AGE_S)
        else:
            response = view(request, *args, **kwargs)
        response["Access-Control-Allow-Origin"] = "*"
        response["Vary"] = ", ".join(v for v in (response.get("Vary"), "Origin") if v)
        return response

    wrapped.csrf_exempt = True  # type: ignore[attr-defined]  # tokens in the body, never a cookie
    return wrapped
