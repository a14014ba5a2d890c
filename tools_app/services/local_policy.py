"""Who may register which LOCAL server, and where it may run: checked on every create and config change.

A LOCAL server is the tenant's code. It runs in the tenant's sandbox, so its working directory and MCP roots must lie
in the tenant workspace (the only folder the sandbox shows). The platform setting TOOLHUB_LOCAL_COMMANDS decides
whether tenant admins may register commands at all (`any`), only the operator's approved ones and entries of global
market sources (`approved`), or none (`off`); platform operators (superusers) may register anything, and only they
may mark a server `unsandboxed`.
"""

from __future__ import annotations

import shlex
from typing import Any

from django.conf import settings

from core.errors import PermissionDenied
from tenants_app.models import Tenant
from tools_app.errors import InvalidConfig
from tools_app.events import release_after_commit
from tools_app.models import Tool, ToolType
from tools_app.runtime.sandbox import SandboxPathRefused, SandboxPolicy, ServerSandbox
from tools_app.wiring.workspaces import workspace_for


def check_local_server(*, tenant: Tenant, actor: Any, tool: Tool | None, config: dict[str, Any],
                       unsandboxed: bool, market_entry: Any = None) -> None:
    """Raise what forbids `actor` to store this LOCAL config (`tool` None on create); nothing is written."""
    operator = bool(getattr(actor, "is_superuser", False))
    if unsandboxed and not operator:
        raise PermissionDenied(
            "only a platform operator (superuser) may run a LOCAL server outside the tenant sandbox",
            details={"field": "unsandboxed"},
        )
    if not operator:
        _check_command_allowed(config, market_entry if tool is None else tool.market_entry)
    if not unsandboxed:
        _check_inside_workspace(tenant, config)


def _check_command_allowed(config: dict[str, Any], market_entry: Any) -> None:
    mode = str(settings.TOOLHUB_LOCAL_COMMANDS)
    if mode == "any":
        return
    if mode != "approved":  # `off` (settings refuse any other value at startup)
        raise PermissionDenied(
            "this platform does not let tenant admins register LOCAL servers (TOOLHUB_LOCAL_COMMANDS=off); "
            "ask a platform operator, or use a REMOTE or HTTP tool",
            details={"field": "config.command", "policy": "off"},
        )
    argv = [str(config.get("command", "")), *(str(a) for a in config.get("args") or [])]
    if any(argv[: len(line)] == line for line in approved_commands()):
        return
    if _from_global_market(argv, market_entry):
        return
    raise PermissionDenied(
        f"LOCAL command {shlex.join(argv)[:200]!r} is not on this platform's approved list; accepted: "
        f"{'; '.join(shlex.join(line) for line in approved_commands()) or 'none'}, or an entry of an operator's "
        "market source loaded as it is",
        details={"field": "config.command", "policy": "approved",
                 "accepted": [shlex.join(line) for line in approved_commands()]},
    )


def approved_commands() -> list[list[str]]:
    return [shlex.split(line) for line in settings.TOOLHUB_LOCAL_APPROVED_COMMANDS]


def _from_global_market(argv: list[str], entry: Any) -> bool:
    """An entry of an operator's (global) market source, with its command and arguments as listed."""
    if entry is None or entry.source.tenant_id is not None:
        return False
    install = entry.install or {}
    listed = [str(install.get("command", "")), *(str(a) for a in install.get("args") or [])]
    return argv == listed


def _check_inside_workspace(tenant: Tenant, config: dict[str, Any]) -> None:
    workspace = str(workspace_for(tenant))
    box = ServerSandbox(policy=SandboxPolicy(), tenant_key=str(tenant.pk), workspace=workspace, uid=0)
    try:
        box.chdir(config.get("cwd"))
    except SandboxPathRefused as exc:
        raise InvalidConfig(exc.message, details={"field": "config.cwd"}) from None
    for root in config.get("roots") or []:
        try:
            box.chdir(root)
        except SandboxPathRefused:
            raise InvalidConfig(
                f"root {root!r} is outside the tenant workspace ({workspace}); a sandboxed LOCAL server sees only "
                "its workspace, so only folders in it can be offered as roots",
                details={"field": "config.roots"},
            ) from None


def recycle_local_servers(*, tenant: Tenant) -> None:
    """Close the running LOCAL servers of `tenant` in every process once this commits; the next call starts them
    under the tenant's current sandbox policy."""
    for tool_id in Tool.objects.filter(tenant=tenant, type=ToolType.LOCAL).values_list("pk", flat=True):
        release_after_commit(tool_id)
