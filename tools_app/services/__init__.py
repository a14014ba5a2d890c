"""Tool writes. Each module holds one family of services; import them from here."""

from core.secrets import KEEP
from tools_app.services.tools import (
    ToolInput,
    tool_create,
    tool_set_status,
    tool_update,
    tools_delete,
)
from tools_app.services.transfer import tools_export, tools_import

__all__ = [
    "KEEP",
    "ToolInput",
    "tool_create",
    "tool_set_status",
    "tool_update",
    "tools_delete",
    "tools_export",
    "tools_import",
]
