"""Export tools (never a secret value) and import an export or a client `mcpServers` document."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from core.errors import DomainError
from tenants_app.models import Role, Tenant
from tenants_app.permissions import ensure_role
from tools_app import selectors
from tools_app.configs import MASK, SECRET_MAPS, mask_config
from tools_app.errors import ImportFailed
from tools_app.models import ToolStatus, ToolType
from tools_app.services.tools import ToolInput, tool_create

EXPORT_FORMAT = "toolhub.tools/v1"
IMPORTABLE_TYPES = (ToolType.LOCAL, ToolType.REMOTE, ToolType.HTTP)


def tools_export(*, tenant: Tenant, actor: Any, ids: list[int]) -> dict[str, Any]:
    """Every requested tool with its config structure; secret values become the mask placeholder."""
    ensure_role(tenant=tenant, user=actor, at_least=Role.ADMIN)
    tools = list(selectors.tools_by_ids(tenant=tenant, ids=ids).order_by("name"))
    if len(tools) != len(set(ids)):
        from tools_app.errors import ToolNotFound

        raise ToolNotFound()
    return {
        "format": EXPORT_FORMAT,
        "tools": [
            {
                "name": t.name,
                "description": t.description,
                "type": t.type,
                "status": t.status,
                "safety": t.safety,
                "requires_approval": t.requires_approval,
                "config": mask_config(t.type, t.config),
            }
            for t in tools
            if t.type in IMPORTABLE_TYPES
        ],
    }


def _items_from_document(document: Any) -> list[tuple[str, dict[str, Any] | None, str | None]]:
    """(name, tool fields, error) per item, for either accepted document shape."""
    if isinstance(document, dict) and document.get("format") == EXPORT_FORMAT:
        items = document.get("tools")
        if not isinstance(items, list):
            raise ImportFailed("the export's \"tools\" must be a list")
        out: list[tuple[str, dict[str, Any] | None, str | None]] = []
        for i, item in enumerate(items):
            if not isinstance(item, dict) or not item.get("name"):
                out.append((f"#{i}", None, "each tool needs an object with a name"))
            else:
                out.append((str(item["name"]), item, None))
        return out
    if isinstance(document, dict) and "mcpServers" in document:
        from market_app.catalog.parsers import mcp_servers_to_tools

        tools, errors = mcp_servers_to_tools(document)
        rows: list[tuple[str, dict[str, Any] | None, str | None]] = [
            (name, {"name": name, "type": kind, "config": config}, None) for name, kind, config in tools
        ]
        rows += [(e.name or "?", None, e.reason) for e in errors]
        return rows
    raise ImportFailed(
        f"unrecognised document; accepted: a Toolhub export (\"format\": \"{EXPORT_FORMAT}\") "
        "or a client config {\"mcpServers\": {...}}"
    )


def tools_import(*, tenant: Tenant, actor: Any, document: Any) -> dict[str, Any]:
    """Create one tool per item, each all-or-nothing; report created tools and per-item errors.

    Masked secrets in an export have nothing to keep: the key is created empty, listed in
    `needs_secrets`, and the tool starts DISABLED until a real value is set.
    """
    ensure_role(tenant=tenant, user=actor, at_least=Role.ADMIN)
    created: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []
    for name, item, error in _items_from_document(document):
        if error or item is None:
            errors.append({"name": name, "code": "unmappable", "message": error or "cannot map"})
            continue
        tool_type = str(item.get("type", "")).upper()
        if tool_type not in IMPORTABLE_TYPES:
            errors.append({"name": name, "code": "invalid_type",
                           "message": f"type {item.get('type')!r} cannot be imported; accepted: LOCAL, REMOTE, HTTP"})
            continue
        config = item.get("config") or {}
        needs = _blank_masked(tool_type, config)
        try:
            with transaction.atomic():
                tool = tool_create(
                    tenant=tenant,
                    actor=actor,
                    data=ToolInput(
                        name=str(item.get("name", "")),
                        description=str(item.get("description") or ""),
                        type=tool_type,
                        status=ToolStatus.DISABLED if needs else item.get("status") or ToolStatus.ENABLED,
                        config=config,
                        safety=item.get("safety"),
                        requires_approval=item.get("requires_approval"),
                    ),
                )
        except DomainError as exc:
            errors.append({"name": name, "code": exc.code, "message": exc.message})
            continue
        created.append({"id": tool.pk, "name": tool.name, "type": tool.type, "status": tool.status,
                        "needs_secrets": needs})
    return {"created": created, "errors": errors}


def _blank_masked(tool_type: str, config: dict[str, Any]) -> list[str]:
    needs = []
    for map_name in SECRET_MAPS[tool_type]:
        section = config.get(map_name)
        if isinstance(section, dict):
            for key, value in section.items():
                if value == MASK:
                    section[key] = ""
                    needs.append(f"{map_name}.{key}")
    return needs
