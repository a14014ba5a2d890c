"""core.messages.LazyMessageMiddleware: an API call builds no message storage; a page that adds a message still
shows it on the next one."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.test import RequestFactory

from core import messages as lazy

pytestmark = pytest.mark.django_db


def test_an_api_call_builds_no_message_storage(api: Any, monkeypatch: Any) -> None:
    from django.contrib.messages import middleware as django_middleware

    built: list[Any] = []
    real = lazy.default_storage  # type: ignore[attr-defined]

    def counted(request: HttpRequest) -> Any:
        built.append(request)
        return real(request)

    # Django's own middleware and ours both reach the storage through a module-level name: count either.
    monkeypatch.setattr(lazy, "default_storage", counted)
    monkeypatch.setattr(django_middleware, "default_storage", counted)
    assert api.get("/api/v1/tools/").status_code == 200
    assert built == []


def _session_request(path: str, cookies: dict[str, str]) -> HttpRequest:
    from django.contrib.sessions.middleware import SessionMiddleware

    request = RequestFactory().get(path)
    request.COOKIES.update(cookies)
    SessionMiddleware(lambda r: HttpResponse()).process_request(request)
    return request


def _called(middleware: lazy.LazyMessageMiddleware, request: HttpRequest) -> HttpResponseBase:
    response = middleware(request)
    assert isinstance(response, HttpResponseBase)  # a sync chain: never an awaitable
    return response


def test_a_message_added_is_stored_and_read_on_the_next_request() -> None:
    def adds(request: HttpRequest) -> HttpResponse:
        messages.success(request, "Saved.")
        return HttpResponse("ok")

    first = _session_request("/admin/", {})
    response = _called(lazy.LazyMessageMiddleware(adds), first)
    stored = response.cookies["messages"].value
    assert stored

    def reads(request: HttpRequest) -> HttpResponse:
        return HttpResponse("|".join(str(m) for m in messages.get_messages(request)))

    second = _session_request("/admin/", {"messages": stored})
    shown = _called(lazy.LazyMessageMiddleware(reads), second)
    assert isinstance(shown, HttpResponse) and shown.content == b"Saved."


def test_a_request_that_never_touches_messages_leaves_the_response_alone() -> None:
    request = _session_request("/api/v1/", {"messages": "anything"})
    response = _called(lazy.LazyMessageMiddleware(lambda r: HttpResponse("ok")), request)
    assert "messages" not in response.cookies
