"""The tools domain's event: a tool's running sessions must go.

Sent by the services that change what a session was opened under (a config version, disabling, deleting, the
tenant's sandbox policy, a package moved); received by this process's MCP pool (tools_app.wiring.pool) and the
broadcast to other processes (tools_app.pool_broadcast), both connected in tools_app.apps. A leaf: it imports
no service, so any service may send it.
"""

from __future__ import annotations

from django.db import transaction
from django.dispatch import Signal

from tools_app.models import Tool

# A tool's running sessions must go: its config_version changed, it was disabled or deleted, or its tenant's
# sandbox policy changed. Sent after commit with `tool_id`; the receivers close the tool's sessions and processes.
tool_released = Signal()


def release_after_commit(tool_id: int) -> None:
    """Send `tool_released` for `tool_id` once the current transaction commits (at once outside one)."""
    transaction.on_commit(lambda: tool_released.send(sender=Tool, tool_id=tool_id))
