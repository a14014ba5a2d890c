"""URLs for tests/core/test_asgi.py: views that say which thread ran them, and one that waits for a signal."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator

from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.urls import path

from core.logging import request_id

release = threading.Event()
entered = threading.Semaphore(0)


def where(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"thread": threading.get_ident(), "request_id": request_id.get()})


def wait(request: HttpRequest) -> JsonResponse:
    entered.release()
    release.wait(10)
    return JsonResponse({"thread": threading.get_ident()})


async def async_view(request: HttpRequest) -> HttpResponse:
    return HttpResponse("async ok")


def stream(request: HttpRequest) -> StreamingHttpResponse:
    async def parts() -> AsyncIterator[bytes]:
        yield b"one "
        yield b"two"

    return StreamingHttpResponse(parts())


def boom(request: HttpRequest) -> HttpResponse:
    raise RuntimeError("boom")


def item(request: HttpRequest, pk: int) -> JsonResponse:
    # The view changes its match's kwargs: the next request of the same path must not see that.
    match = request.resolver_match
    assert match is not None
    seen = dict(match.kwargs)
    match.kwargs["pk"] = -1
    return JsonResponse({"pk": pk, "kwargs": seen, "view": match.view_name})


urlpatterns = [path("where", where), path("wait", wait), path("async", async_view), path("boom", boom),
               path("stream", stream), path("item/<int:pk>", item, name="item")]
