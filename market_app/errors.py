"""Typed errors of the market domain (mapped to HTTP by core.exceptions.exception_handler)."""

from __future__ import annotations

from typing import Any

from core.codes import ApiCode
from core.errors import Conflict, DomainError, NotFound


class MarketError(DomainError):
    code = ApiCode.MARKET_ERROR


class SourceNotFound(NotFound):
    pass


class EntryNotFound(NotFound):
    pass


class InvalidSource(MarketError):
    code = ApiCode.INVALID_SOURCE


class RefreshInProgress(Conflict):
    code = ApiCode.REFRESH_IN_PROGRESS

    def default_message(self) -> str:
        return "This source is already being refreshed; try again when that refresh has finished."


class RefreshFailed(MarketError):
    """The catalog could not be read; `code` is the cause (not_json, not_a_catalog, auth_failed, timeout, ...)."""

    status = 502

    def __init__(self, message: str, *, code: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message, details=details)
        # An unlisted cause still answers within the vocabulary (tests/core/test_codes.py keeps the list whole).
        self.code = ApiCode(code) if code in ApiCode._value2member_map_ else ApiCode.MARKET_ERROR


class EntryRemoved(Conflict):
    code = ApiCode.ENTRY_REMOVED


class NoUpdateAvailable(Conflict):
    code = ApiCode.NO_UPDATE_AVAILABLE


class MissingVariables(MarketError):
    code = ApiCode.MISSING_VARIABLES


class UnknownVariables(MarketError):
    code = ApiCode.UNKNOWN_VARIABLES


class SecretInArguments(MarketError):
    code = ApiCode.SECRET_IN_ARGUMENTS
