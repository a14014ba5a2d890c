"""The one DRF exception handler: every error becomes {"error": {"code", "message", "details"}}."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import Http404
from rest_framework import exceptions as drf_exceptions

from core.codes import ApiCode, error_body
from core.errors import DomainError

if TYPE_CHECKING:
    from rest_framework.response import Response

__all__ = ["error_body", "exception_handler"]

logger = logging.getLogger(__name__)


_DRF_CODES: dict[type[Exception], ApiCode] = {
    drf_exceptions.ParseError: ApiCode.MALFORMED_REQUEST,
    drf_exceptions.NotAuthenticated: ApiCode.NOT_AUTHENTICATED,
    drf_exceptions.AuthenticationFailed: ApiCode.AUTHENTICATION_FAILED,
    drf_exceptions.PermissionDenied: ApiCode.PERMISSION_DENIED,
    drf_exceptions.NotFound: ApiCode.NOT_FOUND,
    drf_exceptions.MethodNotAllowed: ApiCode.METHOD_NOT_ALLOWED,
    drf_exceptions.NotAcceptable: ApiCode.NOT_ACCEPTABLE,
    drf_exceptions.UnsupportedMediaType: ApiCode.UNSUPPORTED_MEDIA_TYPE,
    drf_exceptions.Throttled: ApiCode.THROTTLED,
    drf_exceptions.ValidationError: ApiCode.INVALID,
}


def unavailable_service(exc: BaseException) -> str | None:
    """Which backing service is down ("database", "cache"), when the error is an outage rather than a bug."""
    from django.db import InterfaceError, OperationalError

    if isinstance(exc, OperationalError | InterfaceError):
        return "database"
    try:
        from redis.exceptions import ConnectionError as RedisConnectionError
        from redis.exceptions import TimeoutError as RedisTimeoutError
    except ImportError:  # pragma: no cover - redis is a dependency
        return None
    if isinstance(exc, RedisConnectionError | RedisTimeoutError):
        return "cache"
    return None


def pool_exhausted(exc: BaseException) -> bool:
    """The database answers, but every pooled connection of this process stayed busy for the pool's timeout
    (TOOLHUB_DB_POOL_TIMEOUT_S): overload, not an outage, and worth telling apart in the answer and the log."""
    try:
        from psycopg_pool import PoolTimeout
    except ImportError:  # pragma: no cover - no pool without psycopg_pool
        return False
    return isinstance(exc, PoolTimeout) or isinstance(exc.__cause__, PoolTimeout)


def _busy(exc: Exception) -> bool:
    """SQLite's "database is locked": contention that outlasted the busy timeout, not an outage."""
    from django.db import OperationalError

    return isinstance(exc, OperationalError) and "locked" in str(exc).lower()


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """Map every error to `{"error": {"code", "message", "details"}}`."""
    # Imported here, not with the module: rest_framework.response pulls in DRF's serializers (and through them
    # django.contrib.postgres and psycopg, ~0.3 s of CPU), and this module is imported at every process start
    # (the audit service's outage check), where no request is being answered yet.
    from rest_framework.response import Response
    from rest_framework.views import exception_handler as drf_exception_handler

    if isinstance(exc, DomainError):
        return Response(error_body(exc.code, exc.message, exc.details), status=exc.status)
    if isinstance(exc, RecursionError | OverflowError):
        # Input shaped to exhaust the interpreter (nesting) or a column (a 30-digit id) that slipped
        # past the earlier checks: the request is at fault, and its transaction was rolled back.
        logger.warning("refused input: %s", type(exc).__name__)
        what = "nests too deeply" if isinstance(exc, RecursionError) else "holds a number out of range"
        return Response(error_body(ApiCode.INVALID, f"the request {what}"), status=400)
    if _busy(exc):
        busy = Response(
            error_body(ApiCode.BUSY, "The database is busy with other writes; nothing was written. Retry shortly.",
                       {"retry_after_s": 1}),
            status=409,
        )
        busy["Retry-After"] = "1"
        return busy
    if (service := unavailable_service(exc)) is not None:
        # A restart of PostgreSQL or Redis: say so and when to retry; the next request reconnects by itself.
        exhausted = service == "database" and pool_exhausted(exc)
        logger.warning("%s unavailable: %s%s", service, type(exc).__name__, " (connection pool exhausted)" * exhausted)
        message = (f"The {service} is briefly unavailable; retry shortly." if not exhausted else
                   "Every database connection of this web process is busy; retry shortly.")
        details: dict[str, Any] = {"service": service, "retry_after_s": 2}
        if exhausted:
            details["reason"] = "pool_exhausted"
        outage = Response(error_body(ApiCode.SERVICE_UNAVAILABLE, message, details), status=503)
        outage["Retry-After"] = "2"
        return outage
    if isinstance(exc, RequestDataTooBig):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        return Response(
            error_body(ApiCode.REQUEST_TOO_LARGE, f"request body exceeds the limit of {limit} bytes", {"max_bytes": limit}),
            status=413,
        )
    if isinstance(exc, Http404):
        exc = drf_exceptions.NotFound()
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, drf_exceptions.ValidationError):
        details = response.data if isinstance(response.data, dict) else {"non_field_errors": response.data}
        message = _first_message(details)
        response.data = error_body(ApiCode.INVALID, message, details)
        return response
    code = next((c for t, c in _DRF_CODES.items() if isinstance(exc, t)), "error")
    detail = getattr(exc, "detail", str(exc))
    if code == "not_found":
        detail = "Not found."
    response.data = error_body(code, str(detail))
    if isinstance(exc, drf_exceptions.Throttled) and (wait := getattr(exc, "wait", None)) is not None:
        response.data["error"]["details"] = {"retry_after_s": int(wait)}
    return response


def _first_message(details: Any, prefix: str = "") -> str:
    if isinstance(details, dict):
        for key, value in details.items():
            label = key if key != "non_field_errors" else ""
            return _first_message(value, f"{prefix}{label}: " if label else prefix)
    if isinstance(details, list) and details:
        return _first_message(details[0], prefix)
    return f"{prefix}{details}"
