"""Typed errors of the tools domain (mapped to HTTP by core.api.exception_handler)."""

from __future__ import annotations

from core.errors import Conflict, DomainError, NameTaken, NotFound, PermissionDenied

__all__ = ["NameTaken"]  # re-exported: the shared 409 for taken names


class ToolError(DomainError):
    code = "tool_error"


class ToolNotFound(NotFound):
    pass


class InvalidConfig(ToolError):
    code = "invalid_config"


class BuiltinReadOnly(ToolError):
    code = "builtin_read_only"
    status = 403


class TypeChangeRefused(ToolError):
    code = "type_change_refused"


class ToolDisabled(ToolError):
    code = "tool_disabled"
    status = 409


class InvalidArguments(ToolError):
    code = "invalid_arguments"


class ApprovalRequired(ToolError):
    code = "approval_required"
    status = 409


class ImportFailed(ToolError):
    code = "import_failed"


class ApprovalExpired(Conflict):
    code = "approval_expired"


class ApprovalDecided(Conflict):
    code = "approval_already_decided"


class NotApprover(PermissionDenied):
    code = "permission_denied"


class InvalidAnswer(ToolError):
    """An answer that does not fit the approval: a server question's schema, or an answer to no question."""

    code = "invalid_answer"


class AuthorizationRequired(ToolError):
    """The tool needs an OAuth connection the caller has not got (or that was revoked): `authorize_url` when
    the caller may connect it."""

    code = "authorization_required"


class OAuthFlowRefused(PermissionDenied):
    """An OAuth link or callback that does not belong to this user, this browser, or this moment."""

    code = "oauth_flow_refused"
