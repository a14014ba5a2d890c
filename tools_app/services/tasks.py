"""The Celery tasks the services schedule themselves (after a commit), defined next to what they run: a module
that schedules a task imports the module defining it, never the reverse. Beat's tasks are `tools_app.tasks`."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from core.codes import ApiCode
from tools_app.models import Tool
from tools_app.services.discovery import rediscover


@shared_task(name="tools.refresh_functions")
def refresh_functions(tool_id: int) -> dict[str, Any]:
    """Rediscover a tool's functions (after create or a config change) as the system."""
    tool = Tool.objects.filter(pk=tool_id).select_related("tenant").first()
    if tool is None:
        return {"ok": False, "error": {"code": ApiCode.NOT_FOUND, "message": "tool not found"}}
    return rediscover(tool)
