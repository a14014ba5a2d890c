"""One error-code vocabulary: domain errors (mapped to HTTP by core.exceptions) and Django-free runtime errors."""

from __future__ import annotations

from typing import Any

from core.codes import ApiCode, ResultCode


class DomainError(Exception):
    """Base of every error a service raises on purpose; `code` is stable, `message` is safe to show."""

    code = ApiCode.ERROR
    status = 400

    def __init__(self, message: str | None = None, *, details: dict[str, Any] | None = None) -> None:
        self.message = message or self.default_message()
        self.details = details or {}
        super().__init__(self.message)

    def default_message(self) -> str:
        return self.code.replace("_", " ")


class NotFound(DomainError):
    """Missing, or belonging to another tenant: the two are indistinguishable on purpose."""

    code = ApiCode.NOT_FOUND
    status = 404

    def default_message(self) -> str:
        return "Not found."


class TenantRequired(DomainError):
    code = ApiCode.TENANT_REQUIRED

    def default_message(self) -> str:
        return "This user belongs to several tenants; send the X-Tenant header with a tenant slug."


class TenantNotAvailable(NotFound):
    """X-Tenant names a tenant the caller is not in; unknown and foreign tenants answer alike (never says which)."""

    code = ApiCode.TENANT_NOT_AVAILABLE

    def default_message(self) -> str:
        return "X-Tenant names no tenant you are a member of."


class PermissionDenied(DomainError):
    code = ApiCode.PERMISSION_DENIED
    status = 403


class ValidationFailed(DomainError):
    code = ApiCode.INVALID


class Conflict(DomainError):
    code = ApiCode.CONFLICT
    status = 409


class NameTaken(Conflict):
    code = ApiCode.NAME_TAKEN


# --- Runtime errors: raised by Django-free runtime code (tools, models, outbound), mapped by the services. ---


class RuntimeToolError(Exception):
    """Base of every runtime failure; `code` is a stable snake_case identifier."""

    code = ApiCode.RUNTIME_ERROR
    result_code = ResultCode.EXECUTION_ERROR  # the ToolResult error_code this maps to

    def __init__(self, message: str, *, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or {}


class InvalidParams(RuntimeToolError):
    code = ApiCode.INVALID_PARAMS
    result_code = ResultCode.INVALID_PARAMS


class BusinessError(RuntimeToolError):
    code = ApiCode.BUSINESS_ERROR
    result_code = ResultCode.BUSINESS_ERROR


class ToolTimeout(RuntimeToolError):
    code = ApiCode.TIMEOUT
    result_code = ResultCode.TIMEOUT


class OutboundBlocked(RuntimeToolError):
    """A URL or resolved address the outbound guard refuses."""

    code = ApiCode.OUTBOUND_BLOCKED
    result_code = ResultCode.BUSINESS_ERROR


class DnsFailed(OutboundBlocked):
    """The host name does not resolve: nothing was refused, the name is wrong or DNS is down.

    A subclass of OutboundBlocked so every handler of guard failures still catches it; its own code
    tells the user to check the name, not the allowlist."""

    code = ApiCode.DNS_FAILED


class ResponseTooLarge(RuntimeToolError):
    code = ApiCode.RESPONSE_TOO_LARGE
    result_code = ResultCode.BUSINESS_ERROR
