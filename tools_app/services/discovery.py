"""Test and refresh a tool's functions, pinning drift: changed or new functions wait for approval."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.utils import timezone

from core.codes import ApiCode
from core.secrets import Scrubber, scrubber
from tenants_app.models import Role, Tenant
from tenants_app.permissions import ensure_role
from tools_app import selectors
from tools_app.configs import secret_values
from tools_app.errors import ToolError, ToolNotFound
from tools_app.models import FunctionState, Safety, Tool, ToolFunction, ToolType
from tools_app.runtime.errors import RuntimeToolError
from tools_app.runtime.registry import get_tool
from tools_app.runtime.schemas import schema_hash
from tools_app.services import breaker, screening
from tools_app.wiring.pool import pool
from tools_app.wiring.specs import server_spec

# A probe refused for what the caller lacks (an OAuth connection, their own keys) says nothing about the server.
CALLER_CODES = {ApiCode.AUTHORIZATION_REQUIRED, ApiCode.CREDENTIALS_REQUIRED}
# Failures that say nothing about the server's health: the caller's missing connection or keys, and the
# deployment's outage (no LOCAL runner live, e.g. while Redis restarts).
# ...nor does a probe the pool refused for want of a server slot (the tenant at its fair share of a runner's slots).
NOT_THE_SERVERS = {*CALLER_CODES, ApiCode.RUNNER_UNAVAILABLE, ApiCode.CAPACITY_EXCEEDED}

HTTP_FUNCTION = "call"


@dataclass
class Offered:
    """One function as a server (or the registry, or an HTTP config) offers it now."""

    name: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None = None
    annotations: dict[str, Any] | None = None
    schema_hash: str = ""
    unsupported_reason: str = ""
    # Kept as sent and served by the gateway, outside the hash (tools_app.runtime.mcp.discovery.FunctionInfo).
    title: str = ""
    meta: dict[str, Any] | None = None
    icons: list[dict[str, Any]] | None = None

    def __post_init__(self) -> None:
        if not self.schema_hash:
            self.schema_hash = schema_hash(
                name=self.name, description=self.description, input_schema=self.input_schema,
                output_schema=self.output_schema, annotations=self.annotations,
            )


@dataclass
class Probe:
    ok: bool
    latency_ms: int = 0
    server: dict[str, Any] = field(default_factory=dict)
    protocol_version: str | None = None
    functions: list[Offered] = field(default_factory=list)
    error: dict[str, Any] | None = None  # the API's error shape: code, message, details
    # What else an MCP server tells a model (the screen reads it: screening.screen_server).
    instructions: str = ""
    prompts: list[dict[str, Any]] = field(default_factory=list)
    resources: list[dict[str, Any]] = field(default_factory=list)


def probe_tool(tool: Tool, actor: Any = None) -> Probe:
    """A real look at what the tool offers now (as `actor` where the tool acts as each user), scrubbed of the
    tool's secrets (a server may echo them)."""
    probe = _probe(tool, actor)
    secrets = secret_values(tool.type, tool.config) + selectors.live_secret_values(tenant=tool.tenant, tool=tool)
    return _scrubbed(probe, scrubber(secrets))


def _scrubbed(probe: Probe, scrub: Scrubber) -> Probe:
    if not scrub:
        return probe
    return Probe(
        ok=probe.ok, latency_ms=probe.latency_ms, server=scrub.value(probe.server),
        protocol_version=scrub.text(probe.protocol_version) if probe.protocol_version else probe.protocol_version,
        functions=[
            # The hash stays the server's: it pins what was offered, not what is shown.
            Offered(scrub.text(f.name), scrub.text(f.description), scrub.value(f.input_schema),
                    scrub.value(f.output_schema), scrub.value(f.annotations), f.schema_hash, f.unsupported_reason,
                    scrub.text(f.title), scrub.value(f.meta), scrub.value(f.icons))
            for f in probe.functions
        ],
        error=scrub.value(probe.error),
        instructions=scrub.text(probe.instructions), prompts=scrub.value(probe.prompts),
        resources=scrub.value(probe.resources),
    )


def _probe(tool: Tool, actor: Any) -> Probe:
    """initialize + tools/list for MCP tools; the registry or the config for built-in and HTTP tools."""
    if tool.type == ToolType.BUILTIN:
        try:
            spec = get_tool(tool.builtin_name)
        except KeyError:  # a plugin whose package was uninstalled; the next sync removes the row
            return Probe(ok=False, error={"code": ApiCode.NOT_FOUND, "message": f"no tool named {tool.builtin_name!r} "
                                          "is installed (its plugin package may have been removed)", "details": {}})
        fn = Offered(spec.function_name, spec.description, spec.input_schema)
        return Probe(ok=True, server={"name": "toolhub-builtin", "version": "1"}, functions=[fn])
    if tool.type == ToolType.HTTP:
        cfg = tool.config or {}
        fn = Offered(HTTP_FUNCTION, tool.description or f"{cfg.get('method')} request", cfg.get("input_schema") or {})
        return Probe(ok=True, server={"name": "http", "version": "1"}, functions=[fn])
    started = time.monotonic()
    try:
        # What a server offers rarely depends on whose key it was given: a tool with per-user keys nobody has set
        # is looked at with its own config alone (an OAuth tool still needs a connection).
        found = pool().probe(server_spec(tool, actor, user_values_needed=False))
    except RuntimeToolError as exc:
        return Probe(ok=False, latency_ms=int((time.monotonic() - started) * 1000),
                     error={"code": exc.code, "message": exc.message, "details": exc.details})
    return Probe(
        ok=True,
        latency_ms=found.latency_ms,
        server={"name": found.server_name, "version": found.server_version},
        protocol_version=found.protocol_version,
        functions=[
            Offered(f.name, f.description or "", f.input_schema or {}, f.output_schema, f.annotations, f.schema_hash,
                    f.unsupported_reason, f.title, f.meta, f.icons)
            for f in found.functions
        ],
        instructions=found.instructions, prompts=list(found.prompts), resources=list(found.resources),
    )


def diff(stored: dict[str, ToolFunction], offered: list[Offered]) -> dict[str, list[str]]:
    """Names added, removed and changed between the stored functions and what is offered now."""
    now = {f.name: f for f in offered}
    live = {n: f for n, f in stored.items() if f.state != FunctionState.REMOVED}
    return {
        "added": sorted(n for n in now if n not in live),
        "removed": sorted(n for n in live if n not in now),
        "changed": sorted(n for n in now if n in live and live[n].schema_hash != now[n].schema_hash),
    }


def _body(probe: Probe, changes: dict[str, list[str]]) -> dict[str, Any]:
    if not probe.ok:
        return {"ok": False, "latency_ms": probe.latency_ms, "error": probe.error}
    return {
        "ok": True,
        "latency_ms": probe.latency_ms,
        "server": probe.server,
        "protocol_version": probe.protocol_version,
        "tool_count": len(probe.functions),
        "functions": [{"name": f.name, "description": f.description,
                       **({"unsupported_reason": f.unsupported_reason} if f.unsupported_reason else {})}
                      for f in probe.functions],
        "changes": {k: len(v) for k, v in changes.items()},
        "changed_functions": changes,
    }


def probe_and_record(tool: Tool, actor: Any = None) -> Probe:
    """Probe, and feed the outcome to the breaker (the Test button, refreshes and health checks alike); a probe
    that lacked the caller's connection or keys, or found no runner live, says nothing about the server's health."""
    probe = probe_tool(tool, actor)
    if (probe.error or {}).get("code") in NOT_THE_SERVERS:
        return probe
    breaker.record_outcome(tool_id=tool.pk, ok=probe.ok, error=(probe.error or {}).get("message", ""),
                          tenant_id=tool.tenant_id, protocol_version=probe.protocol_version or "")
    if probe.ok and probe.protocol_version:
        tool.protocol_version = probe.protocol_version
    return probe


def rediscover(tool: Tool, actor: Any = None) -> dict[str, Any]:
    """Probe (outside any transaction: it may take seconds), then store what is offered now."""
    probe = probe_and_record(tool, actor)
    if not probe.ok:
        return _body(probe, {})
    body = _body(probe, store_functions(tool=tool, offered=probe.functions))
    if tool.type in (ToolType.LOCAL, ToolType.REMOTE):
        screen = screening.screen_server(tool, instructions=probe.instructions, prompts=probe.prompts,
                                         resources=probe.resources)
        body["server_screen"] = {"status": screen["status"], "findings": len(screen["findings"])}
    return body


def discover_if_unknown(tool: Tool, actor: Any) -> None:
    """A tool whose functions are not known yet (its server wanted a connection or keys nobody had given) is
    discovered as `actor` once they have connected or set theirs."""
    if not tool.functions.exclude(state=FunctionState.REMOVED).exists():
        rediscover(tool, actor)


def tool_test(*, tenant: Tenant, actor: Any, tool_id: Any) -> dict[str, Any]:
    """Connect for real and report; stores nothing but the health outcome."""
    ensure_role(tenant=tenant, user=actor, at_least=Role.ADMIN)
    tool = selectors.tool_get(tenant=tenant, tool_id=tool_id)
    probe = probe_and_record(tool, actor)
    stored = {f.name: f for f in tool.functions.all()}
    return _body(probe, diff(stored, probe.functions) if probe.ok else {})


def tool_refresh(*, tenant: Tenant, actor: Any, tool_id: Any) -> dict[str, Any]:
    """Rediscover and store: the first discovery is trusted, later drift is held as CHANGED."""
    ensure_role(tenant=tenant, user=actor, at_least=Role.ADMIN)
    return rediscover(selectors.tool_get(tenant=tenant, tool_id=tool_id), actor)


def _imported_approval(tool: Tool, name: str) -> bool | None:
    """A client config with an autoApprove list (kept only where the tenant allows it) means what it meant
    in that client: the listed functions run without asking, every other one asks. Without a list the
    function inherits (None). The flag only ever adds a requirement (approval_policy)."""
    listed = tool.auto_approve_functions or []
    if not listed:
        return None
    return name not in listed


def _definition(fn: Offered) -> dict[str, Any]:
    return {"description": fn.description, "input_schema": fn.input_schema, "output_schema": fn.output_schema,
            "annotations": fn.annotations}


@transaction.atomic
def store_functions(*, tool: Tool, offered: list[Offered]) -> dict[str, list[str]]:
    tool = Tool.objects.select_for_update().get(pk=tool.pk)
    stored = {f.name: f for f in tool.functions.all()}
    changes = diff(stored, offered)
    first = not stored
    by_name = {f.name: f for f in offered}
    # The screen reads the upstream's own text on every discovery, the first included (tools_app.services.screening).
    policy = screening.policy_of(tool.tenant) if screening.screens(tool) else screening.OFF
    others = screening.others_of(tool) if policy != screening.OFF else None
    for name, fn in by_name.items():
        row = stored.get(name)
        fields = {"description": fn.description, "input_schema": fn.input_schema,
                  "output_schema": fn.output_schema, "annotations": fn.annotations, "schema_hash": fn.schema_hash,
                  "unsupported_reason": fn.unsupported_reason[:300], "title": fn.title[:300], "meta": fn.meta,
                  "icons": fn.icons}
        if row is None:
            row = ToolFunction(
                tool=tool, name=name, **fields,
                state=FunctionState.ACTIVE if first else FunctionState.CHANGED,
                requires_approval=_imported_approval(tool, name),
            )
            screening.apply(row, policy=policy, others=others)
            # A first definition is trusted unless the screen holds it: then it waits for an approval like drift.
            if first and row.state == FunctionState.ACTIVE:
                row.approved_hash, row.approved_definition = fn.schema_hash, _definition(fn)
            row.save()
            continue
        trusted = fn.schema_hash == row.approved_hash
        if trusted and row.approved_definition is None:
            row.approved_definition = _definition(fn)  # rows trusted before definitions were kept
        for attr, value in fields.items():
            setattr(row, attr, value)
        row.state = FunctionState.ACTIVE if trusted else FunctionState.CHANGED
        screening.apply(row, policy=policy, others=others)
        row.save()
    for name, row in stored.items():
        if name not in by_name and row.state != FunctionState.REMOVED:
            row.state = FunctionState.REMOVED
            row.save(update_fields=["state", "updated_at"])
    Tool.objects.in_tenant(tool.tenant_id).filter(pk=tool.pk).update(last_checked_at=timezone.now())
    return changes


@transaction.atomic
def function_approve(*, tenant: Tenant, actor: Any, tool_id: Any, name: str) -> ToolFunction:
    """Trust the function's current definition."""
    ensure_role(tenant=tenant, user=actor, at_least=Role.ADMIN)
    fn = _function(tenant=tenant, tool_id=tool_id, name=name, for_update=True)
    if fn.state == FunctionState.REMOVED:
        raise ToolError(f"function {name!r} is no longer offered by the server; nothing to approve",
                        details={"function": name, "state": fn.state})
    fn.approved_hash, fn.state, fn.approved_definition = fn.schema_hash, FunctionState.ACTIVE, fn.definition()
    screening.approve(fn, actor=actor)
    fn.save(update_fields=["approved_hash", "state", "approved_definition", "updated_at", "screen_approved_hash",
                           "screen_approved_by", "screen_approved_at", "screen_status"])
    return fn


@transaction.atomic
def function_update(
    *, tenant: Tenant, actor: Any, tool_id: Any, name: str, enabled: bool | None, requires_approval: Any,
    safety: Any = ..., title_override: Any = ..., description_override: Any = ..., parameter_overrides: Any = ...,
) -> ToolFunction:
    """Per-function switches: enabled, requires_approval (true/false, or null to inherit), a safety override
    (READ_ONLY/WRITE/DESTRUCTIVE, or null/"" to follow the server's annotations) and the tenant's own title and
    description for models and gateway clients (blank restores the upstream's; drift and the screen still read
    the upstream's)."""
    ensure_role(tenant=tenant, user=actor, at_least=Role.ADMIN)
    fn = _function(tenant=tenant, tool_id=tool_id, name=name, for_update=True)
    if enabled is not None:
        fn.enabled = enabled
    if requires_approval is not ...:
        fn.requires_approval = requires_approval
    if safety is not ...:
        if safety not in (None, "", *Safety.values):
            raise ToolError(f"safety must be one of {', '.join(Safety.values)} or null",
                            details={"accepted": list(Safety.values)})
        fn.safety_override = safety or ""
    if title_override is not ...:
        fn.title_override = (title_override or "").strip()
    if description_override is not ...:
        fn.description_override = (description_override or "").strip()
    if parameter_overrides is not ...:
        fn.parameter_overrides = _parameter_overrides(fn, parameter_overrides or {})
    fn.save(update_fields=["enabled", "requires_approval", "safety_override", "title_override",
                           "description_override", "parameter_overrides", "updated_at"])
    return fn


def _parameter_overrides(fn: ToolFunction, changes: dict[str, Any]) -> dict[str, str]:
    """The function's parameter descriptions after `changes` ({parameter: text}; blank or null restores upstream's)."""
    accepted = sorted((fn.input_schema or {}).get("properties") or {})
    unknown = sorted(set(changes) - set(accepted))
    if unknown:
        raise ToolError(f"function {fn.name!r} has no parameter(s) {', '.join(unknown)}; accepted: {accepted}",
                        details={"unknown": unknown, "accepted": accepted})
    merged = dict(fn.parameter_overrides or {})
    for name, text in changes.items():
        if not isinstance(text, str) and text is not None:
            raise ToolError(f"parameter_overrides.{name} must be a string (blank restores the upstream's)",
                            details={"parameter": name})
        if (text or "").strip():
            merged[name] = (text or "").strip()
        else:
            merged.pop(name, None)
    return merged


def _function(*, tenant: Tenant, tool_id: Any, name: str, for_update: bool = False) -> ToolFunction:
    tool = selectors.tool_get(tenant=tenant, tool_id=tool_id)
    qs = ToolFunction.objects.filter(tool=tool, name=name)
    fn = (qs.select_for_update() if for_update else qs).first()
    if fn is None:
        raise ToolNotFound(f"tool {tool.name!r} has no function {name!r}", details={"function": name})
    return fn
