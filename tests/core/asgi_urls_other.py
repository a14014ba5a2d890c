"""A second URLconf for tests/core/test_asgi.py: the same path, another view."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.urls import path


def elsewhere(request: HttpRequest) -> HttpResponse:
    return HttpResponse("elsewhere")


urlpatterns = [path("where", elsewhere)]
