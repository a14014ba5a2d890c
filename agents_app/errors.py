"""Typed errors of the agents domain (mapped to HTTP by core.exceptions.exception_handler)."""

from __future__ import annotations

from core.codes import ApiCode
from core.errors import Conflict, DomainError, NameTaken, NotFound, PermissionDenied

__all__ = ["NameTaken"]  # re-exported: the shared 409 for taken names


class AgentError(DomainError):
    code = ApiCode.AGENT_ERROR


class UnknownFunctions(AgentError):
    """A link's allowed_functions names functions its tool does not offer (details name the accepted ones)."""

    code = ApiCode.UNKNOWN_FUNCTIONS


class AgentNotFound(NotFound):
    pass


class ModelNotConfigured(AgentError):
    code = ApiCode.MODEL_NOT_CONFIGURED

    def default_message(self) -> str:
        return "This agent has no chat model; an admin must pick one (or configure TOOLHUB_DEMO_MODEL_URL)."


class AgentDisabled(Conflict):
    code = ApiCode.AGENT_DISABLED


class AgentNotUsable(PermissionDenied):
    code = ApiCode.PERMISSION_DENIED


class ModelInUse(Conflict):
    code = ApiCode.MODEL_IN_USE


class ConversationBusy(Conflict):
    code = ApiCode.CONVERSATION_BUSY


class NothingToResume(Conflict):
    code = ApiCode.NOTHING_TO_RESUME


class ApprovalsPending(Conflict):
    code = ApiCode.APPROVALS_PENDING


class IntentError(DomainError):
    code = ApiCode.INVALID_INTENT


class IntentHasChildren(Conflict):
    code = ApiCode.INTENT_HAS_CHILDREN


class IntentVersionConflict(Conflict):
    code = ApiCode.VERSION_CONFLICT
