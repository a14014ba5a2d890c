"""Typed errors of the tools domain (mapped to HTTP by core.api.exception_handler)."""

from __future__ import annotations

from core.codes import ApiCode
from core.errors import Conflict, DomainError, NameTaken, NotFound, PermissionDenied

__all__ = ["NameTaken"]  # re-exported: the shared 409 for taken names


class ToolError(DomainError):
    code = ApiCode.TOOL_ERROR


class ToolNotFound(NotFound):
    pass


class InvalidConfig(ToolError):
    code = ApiCode.INVALID_CONFIG


class BuiltinReadOnly(ToolError):
    code = ApiCode.BUILTIN_READ_ONLY
    status = 403


class TypeChangeRefused(ToolError):
    code = ApiCode.TYPE_CHANGE_REFUSED


class ToolDisabled(ToolError):
    code = ApiCode.TOOL_DISABLED
    status = 409


class InvalidArguments(ToolError):
    code = ApiCode.INVALID_ARGUMENTS


class ApprovalRequired(ToolError):
    code = ApiCode.APPROVAL_REQUIRED
    status = 409


class ImportFailed(ToolError):
    code = ApiCode.IMPORT_FAILED


class ApprovalExpired(Conflict):
    code = ApiCode.APPROVAL_EXPIRED


class ApprovalDecided(Conflict):
    code = ApiCode.APPROVAL_ALREADY_DECIDED


class NotApprover(PermissionDenied):
    code = ApiCode.PERMISSION_DENIED


class InvalidAnswer(ToolError):
    """An answer that does not fit the approval: a server question's schema, or an answer to no question."""

    code = ApiCode.INVALID_ANSWER


class AuthorizationRequired(ToolError):
    """The tool needs an OAuth connection the caller has not got (or that was revoked): `authorize_url` when
    the caller may connect it."""

    code = ApiCode.AUTHORIZATION_REQUIRED


class OAuthConnectFailed(ToolError):
    """Connecting an OAuth tool failed upstream (discovery, a blocked address, a refused registration, a resource
    naming another server): a 400 whose `code` is the runtime failure's own (`oauth_failed`,
    `oauth_resource_mismatch`, `outbound_blocked`, ...) and whose message names the step, never a secret."""

    code = ApiCode.OAUTH_FAILED

    @classmethod
    def of(cls, exc: Exception, tool_name: str) -> OAuthConnectFailed:
        message = getattr(exc, "message", None) or type(exc).__name__
        error = cls(f"connecting {tool_name!r} failed: {message}", details=dict(getattr(exc, "details", {}) or {}))
        error.code = ApiCode(getattr(exc, "code", ApiCode.OAUTH_FAILED))
        return error


class OAuthFlowRefused(PermissionDenied):
    """An OAuth link or callback that does not belong to this user, this browser, or this moment."""

    code = ApiCode.OAUTH_FLOW_REFUSED
