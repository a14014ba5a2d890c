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


class OAuthFlowRefused(PermissionDenied):
    """An OAuth link or callback that does not belong to this user, this browser, or this moment."""

    code = ApiCode.OAUTH_FLOW_REFUSED
