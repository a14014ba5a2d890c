"""A tool row and the settings as the runtime's inputs: the MCP server's and the HTTP tool's spec, the sandbox
policies (one builder for LOCAL servers and for execute_command), a built-in's context, the runner a LOCAL tool
runs on."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from django.conf import settings

from core.errors import RuntimeToolError
from tenants_app.models import Tenant
from tools_app import configs, selectors
from tools_app.configs.auth import is_oauth_tool, is_per_user
from tools_app.models import Tool
from tools_app.runtime.builtins import BuiltinContext, SqlTarget
from tools_app.runtime.builtins.command_rules import DEFAULT_ALLOWLIST, INTERPRETERS
from tools_app.runtime.errors import CredentialsNeeded
from tools_app.runtime.mcp.spec import RemoteSpec, ServerSpec
from tools_app.runtime.sandbox import SandboxPolicy, ServerSandbox
from tools_app.wiring.pool import pool
from tools_app.wiring.sql import sql_tables, sql_url
from tools_app.wiring.tokens import token_provider
from tools_app.wiring.workspaces import workspace_for, workspace_of

if TYPE_CHECKING:
    from tools_app.runtime.runner.placement import RunnerInfo


def server_spec(tool: Tool, user: Any = None, *, user_values_needed: bool = True) -> ServerSpec:
    """The MCP pool's spec of a LOCAL or REMOTE tool, as `user` where the tool acts as each user upstream.

    A LOCAL server is offered the tenant's workspace as its MCP root unless its config says otherwise, and runs
    in the tenant's sandbox unless a platform operator marked it unsandboxed (or turned the sandbox off). A tool
    with per-user keys gets this user's values (CredentialsNeeded when some are not set) and a per-user OAuth tool
    this user's connection; either way the session is this user's own (ServerSpec.principal). A discovery probe
    (`user_values_needed=False`) of a user who has not set theirs goes with the tool's own config alone.
    """
    # Validated on save into the type's spec: taken as it is, no second validation per call.
    local = tool.type == "LOCAL"
    roots = (str(workspace_of(tool.tenant_id)),) if local else ()
    sandbox = server_sandbox(tool.tenant) if local and not tool.unsandboxed else None
    spec = configs.server_spec(tool_id=tool.pk, config_version=tool.config_version, tenant_key=str(tool.tenant_id),
                               tool_type=tool.type, config=tool.config or {}, validated=True, default_roots=roots,
                               sandbox=sandbox)
    if local:
        from tools_app.packages.services import (
            runnable_spec,  # a package runner's command runs from the store
        )

        spec = runnable_spec(tool, spec)
    try:
        personal = user_values(tool, user)
    except CredentialsNeeded:
        if user_values_needed:
            raise
        personal = None
    if personal is not None:
        values, principal = personal
        target = spec.target
        if isinstance(target, RemoteSpec):
            target = dataclasses.replace(target, headers=tuple(sorted({**dict(target.headers), **values}.items())))
        else:
            target = dataclasses.replace(target, env=tuple(sorted({**dict(target.env), **values}.items())))
        spec = dataclasses.replace(spec, target=target, principal=principal)
    if tool.type == "REMOTE" and is_oauth_tool(tool) and isinstance(spec.target, RemoteSpec):
        per_user = is_per_user(tool)
        user_id = getattr(user, "pk", None) if per_user else None
        provider = token_provider(tenant_id=tool.tenant_id, tool_id=tool.pk, user_id=user_id, per_user=per_user)
        spec = dataclasses.replace(spec, target=dataclasses.replace(spec.target, token=provider),
                                   principal=spec.principal or (f"user:{user_id}" if per_user else ""))
    return spec


def user_values(tool: Tool, user: Any) -> tuple[dict[str, str], str] | None:
    """This user's values for the tool's per-user keys and the session principal they make ("user:<id>@<stamp>");
    None for a tool without such keys. Raises CredentialsNeeded naming the keys still missing."""
    keys = selectors.user_keys(tool=tool, user=user)
    if keys is None:
        return None
    if keys.missing:
        missing = keys.missing
        raise CredentialsNeeded(
            f"tool {tool.name!r} acts as each user and needs your own {', '.join(missing)}: set "
            f"{'it' if len(missing) == 1 else 'them'} with PUT /api/v1/tools/{tool.pk}/my-credentials/ "
            '{"values": {...}} or on your connections page (/connections/)',
            details={"missing": missing, "keys": keys.declared, "tool_id": tool.pk})
    assert keys.updated_at is not None  # every key set: a stored row
    return ({key: keys.values[key] for key in keys.declared},
            f"user:{getattr(user, 'pk', None)}@{keys.updated_at.timestamp():.6f}")


def http_spec(tool: Tool, user: Any = None) -> configs.HttpConfig:
    """An HTTP tool's spec, validated on save: taken as it is; with per-user keys, `user`'s values as headers."""
    spec = configs.load_config(tool.type, tool.config)
    assert isinstance(spec, configs.HttpConfig), tool.type
    personal = user_values(tool, user)
    if personal is not None:
        spec = spec.model_copy(update={"headers": {**spec.headers, **personal[0]},
                                       "not_secret": list(spec.not_secret)})
    return spec


def tenant_memory_bytes(tenant: Tenant) -> int:
    """The memory all of a tenant's sandboxed processes (LOCAL servers and commands) may hold together."""
    return int(tenant.local_memory_mb or settings.TOOLHUB_SANDBOX_TENANT_MEMORY_MB) << 20


def sandbox_policy(tenant: Tenant, *, servers: bool = False) -> SandboxPolicy:
    """The OS sandbox of a tenant's processes as the settings configure it: execute_command's (on unless
    TOOLHUB_COMMAND_SANDBOX=off) or, with `servers`, its LOCAL servers' (TOOLHUB_LOCAL_SANDBOX_*). Either way its
    processes count toward the tenant's memory together."""
    shared: dict[str, Any] = {"bwrap": str(settings.TOOLHUB_COMMAND_SANDBOX_BWRAP),
                              "tenant_memory_bytes": tenant_memory_bytes(tenant),
                              "cgroup_root": settings.TOOLHUB_SANDBOX_CGROUP}
    if servers:
        return SandboxPolicy(extra_ro_paths=tuple(str(p) for p in settings.TOOLHUB_LOCAL_SANDBOX_RO_PATHS),
                             address_space_bytes=int(settings.TOOLHUB_LOCAL_SANDBOX_PROCESS_MB) << 20,
                             tmp_bytes=256 << 20, **shared)
    return SandboxPolicy(enabled=bool(settings.TOOLHUB_COMMAND_SANDBOX),
                         extra_ro_paths=tuple(str(p) for p in settings.TOOLHUB_COMMAND_SANDBOX_RO_PATHS), **shared)


def server_sandbox(tenant: Tenant) -> ServerSandbox | None:
    """The OS sandbox a tenant's LOCAL servers run in, from the settings and the tenant's policy; None only when the
    operator turned it off (TOOLHUB_LOCAL_SANDBOX=off)."""
    if not settings.TOOLHUB_LOCAL_SANDBOX:
        return None
    return ServerSandbox(
        policy=sandbox_policy(tenant, servers=True),
        tenant_key=str(tenant.pk),
        workspace=str(workspace_of(tenant.pk)),
        uid=int(settings.TOOLHUB_LOCAL_SANDBOX_UID_BASE) + int(tenant.pk),
        share_net=tenant.local_network == "host",
        public_net=tenant.local_network == "public",
    )


def builtin_context(tenant: Tenant, user: Any = None, *, dry_run: bool = False) -> BuiltinContext:
    """The context every registered tool (built-in, record tool, plugin) gets for one call by `user`."""
    interpreters = frozenset(tenant.command_interpreters or ()) & INTERPRETERS
    user = user if getattr(user, "pk", None) is not None else None  # AnonymousUser is no user
    return BuiltinContext(
        tenant_slug=tenant.slug,
        tenant_id=tenant.pk,
        tenant=tenant,
        user_id=getattr(user, "pk", None),
        user=user,
        dry_run=dry_run,
        workspace=workspace_for(tenant),
        # Interpreters run arbitrary code through flags: only with the tenant's explicit opt-in.
        command_allowlist=frozenset(settings.TOOLHUB_COMMAND_ALLOWLIST or DEFAULT_ALLOWLIST) | interpreters,
        interpreters_allowed=interpreters,
        sql=SqlTarget(url=sql_url(), allowed_tables=sql_tables(tenant)),
        sandbox=sandbox_policy(tenant),
    )


def runner_of(tool: Tool) -> RunnerInfo | None:
    """The runner a LOCAL tool's server runs on (None without runners, or when none is live)."""
    # the runners' client (the MCP SDK, redis) on first use: every Django process's start imports this module (issue 35)
    from tools_app.runtime.runner.client import RunnerPool

    current = pool()
    if not isinstance(current, RunnerPool) or tool.type != "LOCAL":
        return None
    try:
        return current.owner_of(server_spec(tool))
    except RuntimeToolError:
        return None
