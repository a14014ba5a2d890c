"""Ready-to-paste MCP client configurations for one agent's gateway endpoint (admin page, README)."""

from __future__ import annotations

import json
from typing import Any

TOKEN_PLACEHOLDER = "<YOUR_TOOLHUB_API_TOKEN>"


def endpoint_path(tenant_slug: str, agent_id: int) -> str:
    return f"/mcp/{tenant_slug}/agents/{agent_id}/"


def client_configs(*, base_url: str, tenant_slug: str, agent_id: int, agent_name: str) -> dict[str, Any]:
    """The endpoint URL and a config per client family, each with the token placeholder."""
    url = base_url.rstrip("/") + endpoint_path(tenant_slug, agent_id)
    key = f"toolhub-{agent_name}"
    bearer = f"Bearer {TOKEN_PLACEHOLDER}"
    cursor = {"mcpServers": {key: {"url": url, "headers": {"Authorization": bearer}}}}
    # Claude Desktop starts local (stdio) servers from its config file; mcp-remote bridges to the URL.
    claude = {"mcpServers": {key: {
        "command": "npx",
        "args": ["-y", "mcp-remote", url, "--header", "Authorization:${TOOLHUB_AUTH}"],
        "env": {"TOOLHUB_AUTH": bearer},
    }}}
    vscode = {
        "servers": {key: {"type": "http", "url": url, "headers": {"Authorization": "Bearer ${input:toolhub-token}"}}},
        "inputs": [{"type": "promptString", "id": "toolhub-token", "description": "Toolhub API token",
                    "password": True}],
    }
    return {
        "url": url,
        "sse_url": url + "sse",
        "cursor": json.dumps(cursor, indent=2),
        "claude_desktop": json.dumps(claude, indent=2),
        "vscode": json.dumps(vscode, indent=2),
    }
