"""Demo data of the tools app for `make run`: the SQL demo database and the inventory MCP tool."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from django.conf import settings

from tenants_app.models import Tenant
from tools_app.models import Tool, ToolType
from tools_app.runtime.builtins.sql_demo import create_demo_database
from tools_app.wiring.sql import sqlite_path

INVENTORY_SERVER = Path(settings.BASE_DIR) / "toolhub_demo" / "inventory_server.py"


def ensure_sql_demo_database() -> Path | None:
    """Create the SQL built-ins' demo SQLite database when the default URL points at a missing file."""
    url = str(settings.TOOLHUB_AGENT_SQL_URL)
    if not url.startswith("sqlite:"):
        return None
    path = sqlite_path(url)
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        create_demo_database(path)
    return path


def seed_tools(tenant: Tenant, user: Any) -> list[str]:
    """Demo SQL database plus a LOCAL inventory tool with its functions discovered."""
    from tools_app.services import ToolInput, tool_create
    from tools_app.services.discovery import rediscover

    ensure_sql_demo_database()
    tool = Tool.objects.filter(tenant=tenant, name="inventory").first()
    if tool is None:
        tool = tool_create(
            tenant=tenant,
            actor=user,
            data=ToolInput(
                name="inventory",
                description="Inventory demo MCP server (stdio): get_inventory(sku)",
                type=ToolType.LOCAL,
                config={"command": sys.executable, "args": [str(INVENTORY_SERVER)], "startup_timeout_s": 20},
                safety="READ_ONLY",
            ),
            queue_discovery=False,  # discovered just below, once: not again by the worker after commit
        )
    if not tool.functions.exists():
        rediscover(tool)
    return [f"  Demo tool: 'inventory' (LOCAL stdio MCP server, id {tool.pk}) — try get_inventory DEMO-001"]
