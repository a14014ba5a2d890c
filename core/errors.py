"""One error-code vocabulary: domain errors (mapped to HTTP by core.exceptions) and Django-free runtime errors."""

from __future__ import annotations

from typing import Any


class DomainError(Exception):
    """Base of every error a service raises on purpose; `code` is stable, `message` is safe to show."""

    code = "error"
    status = 400

    def __init__(self, message: str | None = None, *, details: dict[str, Any] | None = None) -> None:
        self.message = message or self.default_message()
        self.details = details or {}
        super().__init__(self.message)

    def default_message(self) -> str:
        return self.code.replace("_", " ")


class NotFound(DomainError):
    """Missing, or belonging to another tenant: the two are indistinguishable on purpose."""

    code = "not_found"
    status = 404

    def default_message(self) -> str:
        return "Not found."


class TenantRequired(DomainError):
    code = "tenant_required"

    def default_message(self) -> str:
        return "This user belongs to several tenants; send the X-Tenant header with a tenant slug."


class TenantNotAvailable(NotFound):
    """X-Tenant names a tenant the caller is not in; unknown and foreign tenants answer alike (never says which)."""

    code = "tenant_not_available"

    def default_message(self) -> str:
        return "X-Tenant names no tenant you are a member of."


class PermissionDenied(DomainError):
    code = "permission_denied"
    status = 403


class ValidationFailed(DomainError):
    code = "invalid"


class Conflict(DomainError):
    code = "conflict"
    status = 409


class NameTaken(Conflict):
    code = "name_taken"


# --- Runtime errors: raised by Django-free runtime code (tools, models, outbound), mapped by the services. ---


class RuntimeToolError(Exception):
    """Base of every runtime failure; `code` is a stable snake_case identifier."""

    code = "runtime_error"
    result_code = "EXECUTION_ERROR"  # the ToolResult error_code this maps to

    def __init__(self, message: str, *, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or {}


class InvalidParams(RuntimeToolError):
    code = "invalid_params"
    result_code = "INVALID_PARAMS"


class BusinessError(RuntimeToolError):
    code = "business_error"
    result_code = "BUSINESS_ERROR"


class ToolTimeout(RuntimeToolError):
    code = "timeout"
    result_code = "TIMEOUT"


class OutboundBlocked(RuntimeToolError):
    """A URL or resolved address the outbound guard refuses."""

    code = "outbound_blocked"
    result_code = "BUSINESS_ERROR"


class DnsFailed(OutboundBlocked):
    """The host name does not resolve: nothing was refused, the name is wrong or DNS is down.

    A subclass of OutboundBlocked so every handler of guard failures still catches it; its own code
    tells the user to check the name, not the allowlist."""

    code = "dns_failed"


class ResponseTooLarge(RuntimeToolError):
    code = "response_too_large"
    result_code = "BUSINESS_ERROR"
