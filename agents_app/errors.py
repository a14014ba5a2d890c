"""Typed errors of the agents domain (mapped to HTTP by core.exceptions.exception_handler)."""

from __future__ import annotations

from core.errors import Conflict, DomainError, NameTaken, NotFound, PermissionDenied

__all__ = ["NameTaken"]  # re-exported: the shared 409 for taken names


class AgentError(DomainError):
    code = "agent_error"


class UnknownFunctions(AgentError):
    """A link's allowed_functions names functions its tool does not offer (details name the accepted ones)."""

    code = "unknown_functions"


class AgentNotFound(NotFound):
    pass


class ModelNotConfigured(AgentError):
    code = "model_not_configured"

    def default_message(self) -> str:
        return "This agent has no chat model; an admin must pick one (or configure TOOLHUB_DEMO_MODEL_URL)."


class AgentDisabled(Conflict):
    code = "agent_disabled"


class AgentNotUsable(PermissionDenied):
    code = "permission_denied"


class ModelInUse(Conflict):
    code = "model_in_use"


class ConversationBusy(Conflict):
    code = "conversation_busy"


class NothingToResume(Conflict):
    code = "nothing_to_resume"


class ApprovalsPending(Conflict):
    code = "approvals_pending"


class IntentError(DomainError):
    code = "invalid_intent"


class IntentHasChildren(Conflict):
    code = "intent_has_children"


class IntentVersionConflict(Conflict):
    code = "version_conflict"
