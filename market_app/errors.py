"""Typed errors of the market domain (mapped to HTTP by core.exceptions.exception_handler)."""

from __future__ import annotations

from typing import Any

from core.errors import Conflict, DomainError, NotFound


class MarketError(DomainError):
    code = "market_error"


class SourceNotFound(NotFound):
    pass


class EntryNotFound(NotFound):
    pass


class InvalidSource(MarketError):
    code = "invalid_source"


class RefreshInProgress(Conflict):
    code = "refresh_in_progress"

    def default_message(self) -> str:
        return "This source is already being refreshed; try again when that refresh has finished."


class RefreshFailed(MarketError):
    """The catalog could not be read; `code` is the cause (not_json, not_a_catalog, auth_failed, timeout, ...)."""

    status = 502

    def __init__(self, message: str, *, code: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message, details=details)
        self.code = code


class EntryRemoved(Conflict):
    code = "entry_removed"


class NoUpdateAvailable(Conflict):
    code = "no_update_available"


class MissingVariables(MarketError):
    code = "missing_variables"


class UnknownVariables(MarketError):
    code = "unknown_variables"


class SecretInArguments(MarketError):
    code = "secret_in_arguments"
