"""The API's front door (`GET /api/v1/` lists its entry points) and the JSON 404 for unknown `/api/...` paths."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.urls import NoReverseMatch, reverse
from django.views.defaults import page_not_found
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.codes import ApiCode, error_body

AUTH_NOTE = ("Authenticate with `Authorization: Token <key>` (or the admin session). Name the tenant with "
             "`X-Tenant: <slug>`; a user who belongs to exactly one tenant may omit it.")


def is_api_path(path: str) -> bool:
    return path == "/api" or path.startswith("/api/")


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """handler404: the JSON error envelope under /api/, Django's own page elsewhere (the admin, /)."""
    if is_api_path(request.path):
        return JsonResponse(
            error_body(ApiCode.NOT_FOUND, f"No API endpoint at {request.path}; GET /api/v1/ lists the entry points."),
            status=404,
        )
    return page_not_found(request, exception or Http404())


def _is_html_404(request: HttpRequest, response: HttpResponse) -> bool:
    return (response.status_code == 404 and is_api_path(request.path)
            and str(response.get("Content-Type", "")).startswith("text/html"))


class ApiNotFoundMiddleware:
    """Under DEBUG Django answers an unknown path with its debug page (every URL pattern, 16 KB of HTML)
    instead of handler404; an API client gets the JSON envelope in every mode. HTML paths are left alone,
    and CommonMiddleware's trailing-slash redirect still comes first (it sits inside this one)."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[..., Any]) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if self.is_async:
            return self.__acall__(request)
        response = self.get_response(request)
        return not_found(request) if _is_html_404(request, response) else response

    async def __acall__(self, request: HttpRequest) -> Any:
        response = await self.get_response(request)
        return not_found(request) if _is_html_404(request, response) else response


class ApiRootView(APIView):
    """`GET /api/v1/`: each resource's list URL, plus the schema and the docs (no tenant needed)."""

    permission_classes = [AllowAny]
    # name -> URL name; set by the URLconf, which knows every app's routes (core imports no app).
    entry_points: dict[str, str] = {}
    docs: dict[str, str] = {}

    @extend_schema(responses={200: OpenApiTypes.OBJECT}, summary="List the API's entry points")
    def get(self, request: Request) -> Response:
        def url(name: str) -> str | None:
            try:
                return request.build_absolute_uri(reverse(name))
            except NoReverseMatch:
                return None

        body: dict[str, Any] = {
            "version": "1",
            "endpoints": {key: u for key, name in self.entry_points.items() if (u := url(name))},
            "docs": {key: u for key, name in self.docs.items() if (u := url(name))},
            "auth": AUTH_NOTE,
        }
        return Response(body)
