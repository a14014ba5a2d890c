"""Demo views: the demo catalog the demo market source refreshes from."""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET

from toolhub_demo.market import demo_document


@require_GET
def demo_catalog(request: HttpRequest) -> JsonResponse:
    """The demo catalog (public: it holds no secret and only points at a server on this machine)."""
    return JsonResponse(demo_document())
