"""Django's message middleware, with the storage made on first use instead of on every request."""

from __future__ import annotations

from typing import Any

from django.contrib.messages.middleware import MessageMiddleware
from django.contrib.messages.storage import default_storage
from django.http import HttpRequest
from django.utils.functional import SimpleLazyObject, empty


class LazyMessageMiddleware(MessageMiddleware):
    """`request._messages` is built when something reads or adds a message (the admin's pages), not for every API
    call: the default storage (cookie + session) signs nothing and reads nothing until then, but making it took
    ~0.1 ms per request. A storage never touched holds no message, so the response has nothing to store."""

    def process_request(self, request: HttpRequest) -> None:
        request._messages = SimpleLazyObject(lambda: default_storage(request))  # type: ignore[attr-defined]

    def process_response(self, request: HttpRequest, response: Any) -> Any:
        messages = getattr(request, "_messages", None)
        if isinstance(messages, SimpleLazyObject) and messages._wrapped is empty:
            return response
        return super().process_response(request, response)
