"""Unknown `/api/...` paths answer the JSON error envelope (handler404), never Django's HTML page."""

from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views.defaults import page_not_found

from core.exceptions import error_body


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """handler404: the JSON error envelope under /api/, Django's own page elsewhere (the admin, /)."""
    if request.path.startswith("/api/"):
        return JsonResponse(
            error_body("not_found", f"No API endpoint at {request.path}; GET /api/v1/schema/ lists the endpoints."),
            status=404,
        )
    return page_not_found(request, exception or Http404())
