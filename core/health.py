"""GET /healthz: the process answers (no database, no auth) — for load balancers and as the bare-view baseline."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse


def healthz(request: HttpRequest) -> HttpResponse:
    return HttpResponse("ok", content_type="text/plain")
