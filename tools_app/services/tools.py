"""Create, update, enable/disable and delete tools."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import transaction

from core import names
from core.ids import as_id
from core.secrets import KEEP, MASK, kept_keys, require_secrets_on_move
from tenants_app.models import Role, Tenant
from tenants_app.permissions import ensure_role
from tools_app import selectors
from tools_app.configs import SECRET_MAPS, contains_mask, merge_masked, validate_config
from tools_app.errors import (
    BuiltinReadOnly,
    InvalidConfig,
    ToolError,
    ToolNotFound,
    TypeChangeRefused,
)
from tools_app.events import release_after_commit
from tools_app.models import Safety, Tool, ToolStatus, ToolType
from tools_app.services.local_policy import check_local_server


@dataclass
class ToolInput:
    name: str | None = None
    description: str | None = None
    type: str | None = None
    status: str | None = None
    config: Any = KEEP
    safety: str | None = None
    requires_approval: bool | None = None
    unsandboxed: bool | None = None


def check_name(name: Any) -> str:
    return names.check_name(name, what="tool", error=ToolError)


@transaction.atomic
def tool_create(*, tenant: Tenant, actor: Any, data: ToolInput, market_entry: Any = None,
                queue_discovery: bool = True) -> Tool:
    """Create a LOCAL, REMOTE or HTTP tool; built-in rows come only from the built-in sync. `queue_discovery=False`:
    an MCP tool's discovery is not queued after commit, for a caller that discovers it itself right away (the demo
    seed), so its server is not started twice."""
    ensure_role(tenant=tenant, user=actor, at_least=Role.ADMIN)
    if data.type not in (ToolType.LOCAL, ToolType.REMOTE, ToolType.HTTP):
        if data.type == ToolType.BUILTIN:
            raise BuiltinReadOnly("built-in tools cannot be created through the API")
        raise ToolError(
            f"type {data.type!r} is invalid; accepted: LOCAL, REMOTE, HTTP", details={"field": "type"}
        )
    name = check_name(data.name or "")
    if data.config is KEEP or data.config is None:
        raise InvalidConfig(f"config is required for a {data.type} tool", details={"field": "config"})
    config = config_check(tool=None, tool_type=data.type, incoming=data.config)
    unsandboxed = bool(data.unsandboxed) and data.type == ToolType.LOCAL
    if data.type == ToolType.LOCAL:
        check_local_server(tenant=tenant, actor=actor, tool=None, config=config, unsandboxed=unsandboxed,
                           market_entry=market_entry)
    tool = Tool(
        tenant=tenant,
        name=name,
        description=data.description or "",
        type=data.type,
        status=data.status or ToolStatus.ENABLED,
        config=config,
        safety=data.safety or Safety.WRITE,
        requires_approval=bool(data.requires_approval),
        created_by=actor if getattr(actor, "pk", None) else None,
        market_entry=market_entry,
        market_hash=getattr(market_entry, "content_hash", "") or "",
        unsandboxed=unsandboxed,
    )
    names.save_unique_name(tool, what="tool")
    _functions_follow_config(tool, queue_discovery=queue_discovery)
    return tool


def _functions_follow_config(tool: Tool, *, queue_discovery: bool = True) -> None:
    """HTTP tools define their function locally (stored now); MCP tools are rediscovered after commit."""
    if tool.type == ToolType.LOCAL:
        from tools_app.packages.follow import package_follow_config

        package_follow_config(tool)  # before discovery's own on_commit: the install it would wait for comes first
    if tool.type == ToolType.HTTP:
        from tools_app.services.discovery import probe_tool, store_functions

        store_functions(tool=tool, offered=probe_tool(tool).functions)
    elif tool.type in (ToolType.LOCAL, ToolType.REMOTE) and settings.TOOLHUB_DISCOVER_ON_SAVE and queue_discovery:
        from tools_app.services.tasks import refresh_functions

        transaction.on_commit(functools.partial(refresh_functions.delay, tool.pk))


@transaction.atomic
def tool_update(*, tenant: Tenant, actor: Any, tool_id: Any, changes: ToolInput) -> Tool:
    """Apply changes; a new config bumps config_version (recycling pooled sessions) and resets the breaker."""
    ensure_role(tenant=tenant, user=actor, at_least=Role.ADMIN)
    tool = selectors.tool_get_for_update(tenant=tenant, tool_id=tool_id)
    if tool.type == ToolType.BUILTIN:
        raise BuiltinReadOnly("built-in tools cannot be edited through the API; owners may enable or disable them")
    if changes.type is not None and changes.type != tool.type:
        raise TypeChangeRefused(
            f"the type of an existing tool cannot change ({tool.type} → {changes.type}); create a new tool",
            details={"field": "type", "current": tool.type},
        )
    if changes.name is not None and changes.name != tool.name:
        tool.name = check_name(changes.name)
    for attr in ("description", "safety", "requires_approval"):
        value = getattr(changes, attr)
        if value is not None:
            setattr(tool, attr, value)
    if changes.status is not None:
        tool.status = changes.status
    config = tool.config
    if changes.config is not KEEP and changes.config != "":
        config = config_check(tool=tool, tool_type=tool.type, incoming=changes.config)
    unsandboxed = tool.unsandboxed if changes.unsandboxed is None else bool(changes.unsandboxed)
    sandbox_changed = tool.type == ToolType.LOCAL and unsandboxed != tool.unsandboxed
    if config != tool.config or sandbox_changed:
        if tool.type == ToolType.LOCAL:
            check_local_server(tenant=tenant, actor=actor, tool=tool, config=config or {}, unsandboxed=unsandboxed)
        tool.config = config
        tool.unsandboxed = unsandboxed and tool.type == ToolType.LOCAL
        _config_changed(tool)  # recycles the running server: a new config, or in/out of the sandbox, at once
        names.save_unique_name(tool, what="tool")
        _functions_follow_config(tool)
        return tool
    names.save_unique_name(tool, what="tool")
    return tool


def config_check(*, tool: Tool | None, tool_type: str, incoming: Any) -> dict[str, Any]:
    """The config a create (`tool` None) or an update of `tool` would store; raises what the save would raise.

    Writes nothing: the admin's structured form calls it to put each error at its field before saving.
    """
    if tool is None:
        if isinstance(incoming, dict) and (masked := contains_mask(tool_type, incoming)):
            raise InvalidConfig(
                f"{', '.join('config.' + m for m in masked)} is {MASK!r} but a new tool has no stored value to keep",
                details={"fields": masked, "field": f"config.{masked[0]}"},
            )
        return validate_config(tool_type, incoming)
    if not isinstance(incoming, dict):
        raise InvalidConfig("config must be a JSON object, \"\" or omitted", details={"field": "config"})
    _secrets_follow_origin(tool, incoming)
    return validate_config(tool.type, merge_masked(tool.type, stored=tool.config, incoming=incoming))


def _secrets_follow_origin(tool: Tool, incoming: dict[str, Any]) -> None:
    """A REMOTE or HTTP tool whose URL moves to another origin may not keep its secrets by "********"."""
    stored = tool.config or {}
    new_url = incoming.get("url")
    if tool.type in (ToolType.REMOTE, ToolType.HTTP) and isinstance(new_url, str):
        kept = kept_keys(stored=stored, incoming=incoming, secret_maps=SECRET_MAPS[tool.type])
        kept += [m for m in contains_mask(tool.type, incoming) if m == "auth.client_secret"
                 and ((stored.get("auth") or {}).get("client_secret"))]
        require_secrets_on_move(old_url=stored.get("url"), new_url=new_url,
                                kept=[f"config.{k}" for k in kept], field="config.url")


def _config_changed(tool: Tool) -> None:
    tool.config_version += 1
    tool.consecutive_failures = 0
    tool.disabled_until = None
    tool_id = tool.pk
    release_after_commit(tool_id)


@transaction.atomic
def tool_set_status(*, tenant: Tenant, actor: Any, tool_id: Any, status: str) -> Tool:
    """Enable or disable a tool; built-ins need the owner role."""
    if status not in ToolStatus.values:
        raise ToolError(f"status {status!r} is invalid; accepted: ENABLED, DISABLED", details={"field": "status"})
    tool = selectors.tool_get_for_update(tenant=tenant, tool_id=tool_id)
    ensure_role(tenant=tenant, user=actor, at_least=Role.OWNER if tool.type == ToolType.BUILTIN else Role.ADMIN)
    if tool.status != status:
        tool.status = status
        if status == ToolStatus.ENABLED:
            tool.consecutive_failures, tool.disabled_until = 0, None
        tool.save(update_fields=["status", "consecutive_failures", "disabled_until", "updated_at"])
        if status == ToolStatus.DISABLED:
            # A disabled tool's server must not idle on until the TTL: close it once the change commits.
            release_after_commit(tool.pk)
    return tool


def parse_ids(raw: str | list[Any]) -> list[int]:
    items = raw.split(",") if isinstance(raw, str) else list(raw)
    ids: list[int] = []
    for item in items:
        pk = as_id(item)
        if pk is None:
            raise ToolError(
                f"tool id {str(item).strip()!r} is not an integer; send comma-separated integer ids",
                details={"ids": str(raw)[:200]},
            )
        ids.append(pk)
    if not ids:
        raise ToolError("no tool ids given", details={"ids": str(raw)})
    return sorted(set(ids))


@transaction.atomic
def tools_delete(*, tenant: Tenant, actor: Any, ids: list[int]) -> int:
    """Delete all of `ids` or none: every id is checked before any row is removed."""
    ensure_role(tenant=tenant, user=actor, at_least=Role.ADMIN)
    tools = list(selectors.tools_by_ids(tenant=tenant, ids=ids).select_for_update())
    if len(tools) != len(ids):
        raise ToolNotFound()
    if any(t.type == ToolType.BUILTIN for t in tools):
        names = [t.name for t in tools if t.type == ToolType.BUILTIN]
        raise BuiltinReadOnly(f"built-in tools cannot be deleted: {', '.join(names)}", details={"builtin": names})
    for tool in tools:
        tool_id = tool.pk
        release_after_commit(tool_id)
    Tool.objects.filter(pk__in=ids, tenant=tenant).delete()
    return len(ids)
