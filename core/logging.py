"""Structured logs: one JSON object per line carrying the request id and tool call id of the current context."""

from __future__ import annotations

import contextvars
import json
import logging
import re
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from django.http import HttpRequest, HttpResponse

from core import hotcache

request_id: contextvars.ContextVar[str] = contextvars.ContextVar("toolhub_request_id", default="")
call_id: contextvars.ContextVar[str] = contextvars.ContextVar("toolhub_call_id", default="")
_INCOMING_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
_STANDARD = set(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime"}


class ContextFilter(logging.Filter):
    """Stamps every record with the current request id and call id (empty outside a request or call)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = request_id.get()
        record.call_id = call_id.get()
        return True


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "request_id": getattr(record, "request_id", request_id.get()),
            "call_id": getattr(record, "call_id", call_id.get()),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD and key not in line:
                line[key] = value if isinstance(value, str | int | float | bool | None) else repr(value)
        if record.exc_text:  # the secret filter leaves the traceback here, scrubbed
            line["exc"] = record.exc_text
        elif record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False)


class RequestIdMiddleware:
    """Takes a well-formed X-Request-ID from the proxy or makes one; echoes it on the response."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        incoming = request.headers.get("X-Request-ID", "")
        rid = incoming if _INCOMING_ID.match(incoming) else uuid.uuid4().hex
        token = request_id.set(rid)
        try:
            with hotcache.request_scope():
                response = self.get_response(request)
        finally:
            request_id.reset(token)
        response["X-Request-ID"] = rid
        return response
