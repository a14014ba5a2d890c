"""Translate tool rows and settings into the Django-free runtime's inputs (specs, policies, contexts)."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path
from typing import Any

import httpx2
from django.conf import settings

from core.errors import RuntimeToolError
from core.outbound import GuardedTransport, OutboundPolicy, ssl_context
from core.process_state import PerProcess
from tenants_app.models import Tenant
from tools_app import configs, selectors
from tools_app.models import Tool
from tools_app.runtime.builtins import BuiltinContext, SqlTarget
from tools_app.runtime.builtins.command_rules import DEFAULT_ALLOWLIST, INTERPRETERS
from tools_app.runtime.builtins.sql_demo import demo_url
from tools_app.runtime.errors import CredentialsNeeded
from tools_app.runtime.mcp.pool import SessionPool, configure_pool
from tools_app.runtime.mcp.spec import RemoteSpec, ServerSpec
from tools_app.runtime.runner.client import RunnerPool
from tools_app.runtime.runner.placement import Registry, RunnerInfo
from tools_app.runtime.sandbox import SandboxPolicy, ServerSandbox

_pool_lock = threading.Lock()
_pool: SessionPool | RunnerPool | None = None


def outbound_policy(**overrides: Any) -> OutboundPolicy:
    return OutboundPolicy.build(
        settings.TOOLHUB_OUTBOUND_ALLOW,
        max_bytes=overrides.get("max_bytes", settings.TOOLHUB_OUTBOUND_MAX_BYTES),
        timeout_s=overrides.get("timeout_s", settings.TOOLHUB_OUTBOUND_TIMEOUT_S),
    )


def pool() -> SessionPool | RunnerPool:
    """This process's MCP session pool, configured from settings on first use: with runners (TOOLHUB_RUNNERS) a
    facade that sends LOCAL servers to their runner and keeps REMOTE ones here."""
    global _pool
    with _pool_lock:
        if _pool is None:
            local = local_pool()
            _pool = RunnerPool(local, runner_registry(), settings.TOOLHUB_RUNNER_SECRET) \
                if settings.TOOLHUB_RUNNERS else local
            from tools_app.pool_broadcast import start_listener

            start_listener(release_tool)
        return _pool


def local_pool() -> SessionPool:
    """The process-wide session pool from settings (a runner hosts its servers in one)."""
    return configure_pool(
        policy=outbound_policy(),
        idle_ttl_s=settings.TOOLHUB_POOL_IDLE_TTL_S,
        max_per_tenant=settings.TOOLHUB_POOL_MAX_PER_TENANT,
        max_total=settings.TOOLHUB_POOL_MAX_TOTAL,
        fair_share=settings.TOOLHUB_POOL_FAIR_SHARE,
        input_rounds=settings.TOOLHUB_MCP_INPUT_ROUNDS,
    )


def runner_registry() -> Registry:
    return Registry(settings.REDIS_URL, ttl_s=settings.TOOLHUB_RUNNER_TTL_S, secret=settings.TOOLHUB_RUNNER_SECRET)


def runner_of(tool: Tool) -> RunnerInfo | None:
    """The runner a LOCAL tool's server runs on (None without runners, or when none is live)."""
    current = pool()
    if not isinstance(current, RunnerPool) or tool.type != "LOCAL":
        return None
    try:
        return current.owner_of(server_spec(tool))
    except RuntimeToolError:
        return None


# Per process (core.process_state) and allowlist: building a client loads the CA bundle, so it is reused.
_http_clients: PerProcess[dict[str, httpx2.Client]] = PerProcess(dict)


def guarded_http_client() -> httpx2.Client:
    """A pooled HTTP client whose every request (model endpoints) goes through the outbound guard, pinned.

    One per process and allowlist: building a client loads the CA bundle, so it is reused.
    """
    key = str(settings.TOOLHUB_OUTBOUND_ALLOW)
    clients = _http_clients.get()
    with _pool_lock:
        client = clients.get(key)
        if client is None:
            client = httpx2.Client(
                transport=GuardedTransport(outbound_policy(), verify=ssl_context(),
                                           limits=httpx2.Limits(max_connections=200, max_keepalive_connections=40)),
                follow_redirects=False,
                trust_env=False,
            )
            clients[key] = client
        return client


def release_tool(tool_id: int) -> None:
    """Close this process's sessions of a tool (config changed or tool deleted)."""
    if _pool is not None:
        _pool.close(tool_id)


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
    roots = (str(_workspace_of(tool.tenant_id)),) if local else ()
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
    auth = (tool.config or {}).get("auth") or {}
    if tool.type == "REMOTE" and auth.get("type") == "oauth2" and isinstance(spec.target, RemoteSpec):
        from tools_app.services.oauth import token_provider  # services import adapters

        per_user = bool(auth.get("per_user"))
        user_id = getattr(user, "pk", None) if per_user else None
        provider = token_provider(tenant_id=tool.tenant_id, tool_id=tool.pk, user_id=user_id, per_user=per_user)
        spec = dataclasses.replace(spec, target=dataclasses.replace(spec.target, token=provider),
                                   principal=spec.principal or (f"user:{user_id}" if per_user else ""))
    return spec


def acts_as_user(tool: Tool) -> bool:
    """The tool reaches its server as each calling user (per-user keys or per-user OAuth), not as one account."""
    config = tool.config or {}
    return bool(config.get("user_secrets")) or bool((config.get("auth") or {}).get("per_user"))


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
            '{"values": {...}} or on your connections page (/accounts/connections/)',
            details={"missing": missing, "keys": keys.declared, "tool_id": tool.pk})
    assert keys.updated_at is not None  # every key set: a stored row
    return ({key: keys.values[key] for key in keys.declared},
            f"user:{getattr(user, 'pk', None)}@{keys.updated_at.timestamp():.6f}")


def server_sandbox(tenant: Tenant) -> ServerSandbox | None:
    """The OS sandbox a tenant's LOCAL servers run in, from the settings and the tenant's policy; None only when the
    operator turned it off (TOOLHUB_LOCAL_SANDBOX=off)."""
    if not settings.TOOLHUB_LOCAL_SANDBOX:
        return None
    policy = SandboxPolicy(
        bwrap=str(settings.TOOLHUB_COMMAND_SANDBOX_BWRAP),
        extra_ro_paths=tuple(str(p) for p in settings.TOOLHUB_LOCAL_SANDBOX_RO_PATHS),
        address_space_bytes=int(settings.TOOLHUB_LOCAL_SANDBOX_PROCESS_MB) << 20,
        tmp_bytes=256 << 20,
        tenant_memory_bytes=tenant_memory_bytes(tenant),
        cgroup_root=settings.TOOLHUB_SANDBOX_CGROUP,
    )
    return ServerSandbox(
        policy=policy,
        tenant_key=str(tenant.pk),
        workspace=str(_workspace_of(tenant.pk)),
        uid=int(settings.TOOLHUB_LOCAL_SANDBOX_UID_BASE) + int(tenant.pk),
        share_net=tenant.local_network == "host",
        public_net=tenant.local_network == "public",
    )


def tenant_memory_bytes(tenant: Tenant) -> int:
    """The memory all of a tenant's sandboxed processes (LOCAL servers and commands) may hold together."""
    return int(tenant.local_memory_mb or settings.TOOLHUB_SANDBOX_TENANT_MEMORY_MB) << 20


def workspace_dirname(tenant_id: int) -> str:
    """The workspace folder of a tenant: keyed by its id, never its slug.

    A slug can be renamed and then reused by a new tenant, which would inherit the old files. The dot
    cannot occur in a slug, so no folder of the old `<slug>` layout is ever mistaken for an id folder.
    """
    return f"tenant.{int(tenant_id)}"


def http_spec(tool: Tool, user: Any = None) -> configs.HttpConfig:
    """An HTTP tool's spec, validated on save: taken as it is; with per-user keys, `user`'s values as headers."""
    spec = configs.load_config(tool.type, tool.config)
    assert isinstance(spec, configs.HttpConfig), tool.type
    personal = user_values(tool, user)
    if personal is not None:
        spec = spec.model_copy(update={"headers": {**spec.headers, **personal[0]},
                                       "not_secret": list(spec.not_secret)})
    return spec


def workspace_for(tenant: Tenant) -> Path:
    return _workspace_of(tenant.pk)


def _workspace_of(tenant_id: int) -> Path:
    path = Path(settings.TOOLHUB_WORKSPACE_ROOT) / workspace_dirname(tenant_id)
    path.mkdir(parents=True, exist_ok=True)
    return path.resolve()


def sqlite_path(url: str) -> Path:
    """The absolute file of a `sqlite:///...` URL (three or four slashes both mean an absolute path here)."""
    return Path("/" + url.removeprefix("sqlite:").lstrip("/"))


def sql_url() -> str:
    """The SQL built-ins' database: the TOOLHUB_AGENT_SQL_DB alias when configured, else TOOLHUB_AGENT_SQL_URL."""
    db = settings.DATABASES.get(settings.TOOLHUB_AGENT_SQL_DB)
    if not db:
        url = str(settings.TOOLHUB_AGENT_SQL_URL)
        return demo_url(sqlite_path(url)) if url.startswith("sqlite:") else url
    if db["ENGINE"].endswith("sqlite3"):
        return demo_url(Path(db["NAME"]))
    user = db.get("USER") or ""
    auth = f"{user}:{db['PASSWORD']}@" if db.get("PASSWORD") else (f"{user}@" if user else "")
    return f"postgresql://{auth}{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}/{db['NAME']}"


def sql_tables(tenant: Tenant) -> frozenset[str]:
    tables = tenant.sql_allowed_tables or settings.TOOLHUB_SQL_ALLOWED_TABLES
    return frozenset(str(t) for t in tables if t and t != "*")


def sandbox_policy(tenant: Tenant) -> SandboxPolicy:
    """execute_command's OS sandbox as the settings configure it (on unless TOOLHUB_COMMAND_SANDBOX=off); its
    processes count toward the tenant's memory together with its LOCAL servers."""
    return SandboxPolicy(
        enabled=bool(settings.TOOLHUB_COMMAND_SANDBOX),
        bwrap=str(settings.TOOLHUB_COMMAND_SANDBOX_BWRAP),
        extra_ro_paths=tuple(str(p) for p in settings.TOOLHUB_COMMAND_SANDBOX_RO_PATHS),
        tenant_memory_bytes=tenant_memory_bytes(tenant),
        cgroup_root=settings.TOOLHUB_SANDBOX_CGROUP,
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


def pool_stats() -> dict[str, Any]:
    """The pool's counters for metrics; zeros while this process has not opened the pool (scraping never starts it)."""
    with _pool_lock:
        current = _pool
    return current.stats() if current is not None else {}
