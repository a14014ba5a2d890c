"""The HTTP request span (Django middleware); it removes itself when tracing is off (core.tracing)."""

from __future__ import annotations

from collections.abc import Callable

from django.core.exceptions import MiddlewareNotUsed
from django.http import HttpRequest, HttpResponse

from core import tracing


class TracingMiddleware:
    """One SERVER span per request, continuing the caller's trace (W3C traceparent) when it sends one."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        if not tracing.enabled():
            raise MiddlewareNotUsed()  # not in the chain at all: tracing that is off costs nothing here
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        attributes = {"http.request.method": request.method, "url.path": request.path,
                      "server.address": request.get_host() if request.META.get("HTTP_HOST") else None}
        with tracing.span(f"HTTP {request.method}", attributes, kind="server",
                          context=tracing.extract(request.headers)) as current:
            response = self.get_response(request)
            match = getattr(request, "resolver_match", None)
            route = (getattr(match, "route", None) or "").lstrip("^").rstrip("$")  # router routes are regexes
            if route:
                tracing.rename(current, f"{request.method} /{route}")
            tracing.set_attributes(current, **{"http.response.status_code": response.status_code,
                                               "http.route": f"/{route}" if route else None})
            return response
