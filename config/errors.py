"""Typed domain errors shared by every app; config.api.exception_handler maps them to HTTP once."""

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
