"""Agents writes. Each module holds one family of services; import them from here (chat runs: agents_app.chat)."""

from agents_app.services.catalog import (
    AgentInput,
    ChatModelInput,
    ToolLink,
    agent_create,
    agent_delete,
    agent_update,
    chat_model_create,
    chat_model_delete,
    chat_model_update,
)
from core.secrets import KEEP

__all__ = [
    "KEEP",
    "AgentInput",
    "ChatModelInput",
    "ToolLink",
    "agent_create",
    "agent_delete",
    "agent_update",
    "chat_model_create",
    "chat_model_delete",
    "chat_model_update",
]
