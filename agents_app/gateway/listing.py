"""The agent's functions as MCP tools for one principal, their fingerprint, and the secrets to scrub from them."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from django.utils import timezone

from agents_app.gateway.principal import Principal, refresh
from agents_app.runtime.toolset import ToolsetFunction
from agents_app.toolsets import build_toolset
from core import hotcache
from core.errors import NotFound
from core.secrets import redact
from tools_app import selectors as tool_selectors
from tools_app.errors import ToolNotFound
from tools_app.models import (
    Safety,
    Tool,
    ToolFunction,
    with_parameter_overrides,
)

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class GatewayFunction:
    """A toolset function as an MCP tool: the qualified name and the definition as the server sent it (its own
    input schema, not chat's model-facing one; output schema, annotations, `_meta`, icons), with the hints of
    Toolhub's effective safety and a title where the server gave none."""

    name: str
    description: str
    input_schema: dict[str, Any]
    title: str
    read_only: bool
    destructive: bool
    function: ToolsetFunction = field(compare=False)
    output_schema: dict[str, Any] | None = None
    annotations: Mapping[str, Any] | None = None
    meta: Mapping[str, Any] | None = None
    icons: tuple[Mapping[str, Any], ...] = ()

    def wire(self) -> dict[str, Any]:
        """Everything a client sees; its hash is the toolset fingerprint."""
        return {"name": self.name, "description": self.description, "inputSchema": self.input_schema,
                "title": self.title, "readOnly": self.read_only, "destructive": self.destructive,
                "outputSchema": self.output_schema, "annotations": dict(self.annotations or {}),
                "_meta": dict(self.meta or {}), "icons": [dict(i) for i in self.icons]}


# --- the agent's functions ------------------------------------------------------------------------


@dataclass(frozen=True)
class Listing:
    """What tools/list answers one user for one agent, by name, and its fingerprint."""

    functions: tuple[GatewayFunction, ...]
    by_name: Mapping[str, GatewayFunction]
    fingerprint: str
    valid_until: float | None = None  # a linked tool's breaker pause runs out then (time.time())


def listing(principal: Principal) -> Listing:
    """The agent's functions for this user, assembled once and kept in memory until anything they depend on
    changes: the tenant's tools, functions, agents and links, or anyone's role or grants (the same changes
    that make tools/list answer differently and so send list_changed), or a breaker's pause running out."""
    key = (principal.tenant.pk, principal.agent.pk, principal.user.pk)
    return hotcache.remembered("gateway-listing", key, (hotcache.AUTH, hotcache.tenant_scope(principal.tenant.pk)),
                               lambda: _assemble(principal), valid_until=lambda made: made.valid_until)


def _assemble(principal: Principal) -> Listing:
    toolset = build_toolset(tenant=principal.tenant, actor=principal.user, agent=principal.agent)
    linked = [link.tool_id for link in principal.agent.agent_tools.all()]
    keys = {(f.tool_id, f.function) for f in toolset}
    # The definitions as the servers sent them (chat's toolset carries the model-facing input schema).
    sent: dict[tuple[int, str], dict[str, Any]] = {}
    if keys:
        rows = ToolFunction.objects.filter(tool__tenant=principal.tenant, tool_id__in={k[0] for k in keys}).values(
            "tool_id", "name", "input_schema", "output_schema", "annotations", "title", "meta", "icons", "title_override", "parameter_overrides")
        sent = {(row["tool_id"], row["name"]): dict(row) for row in rows if (row["tool_id"], row["name"]) in keys}
    functions = tuple(_gateway_function(f, sent.get((f.tool_id, f.function)) or {}) for f in toolset)
    # A paused tool comes back when its pause runs out, with no write to signal it: the listing lives no longer.
    paused = (Tool.objects.filter(tenant=principal.tenant, pk__in=linked, disabled_until__gt=timezone.now())
              .order_by("disabled_until").values_list("disabled_until", flat=True).first()) if linked else None
    return Listing(functions=functions, by_name=MappingProxyType({f.name: f for f in functions}),
                   fingerprint=fingerprint_of(principal, list(functions)),
                   valid_until=paused.timestamp() if paused is not None else None)


def _gateway_function(f: ToolsetFunction, row: dict[str, Any]) -> GatewayFunction:
    annotations = dict(row.get("annotations") or {}) if isinstance(row.get("annotations"), dict) else {}
    title = row.get("title_override") or row.get("title") or annotations.get("title") or f"{f.tool_name}: {f.function}"
    annotations["title"] = title if row.get("title_override") else annotations.get("title", title)
    # Toolhub states the safety its approval rule uses (an admin's override, a DESTRUCTIVE tool): where the
    # server's own hints say so too, a client sees exactly what the server sent.
    annotations["readOnlyHint"] = f.safety == Safety.READ_ONLY
    annotations["destructiveHint"] = f.safety == Safety.DESTRUCTIVE
    icons = row.get("icons")
    return GatewayFunction(
        name=f.qualified_name,
        description=f.description,
        input_schema=with_parameter_overrides(row["input_schema"], row.get("parameter_overrides"))
        if row.get("input_schema") else f.parameters,
        title=str(title),
        read_only=f.safety == Safety.READ_ONLY,
        destructive=f.safety == Safety.DESTRUCTIVE,
        function=f,
        output_schema=row.get("output_schema") or None,
        annotations=MappingProxyType(annotations),
        meta=MappingProxyType(dict(row["meta"])) if isinstance(row.get("meta"), dict) else None,
        icons=tuple(i for i in icons if isinstance(i, dict)) if isinstance(icons, list) else (),
    )


def list_functions(principal: Principal) -> list[GatewayFunction]:
    """The agent's functions exactly as chat assembles them for this user, with MCP annotations."""
    return list(listing(principal).functions)


def fingerprint(principal: Principal) -> str:
    """A hash of what tools/list shows this user for this agent (and the agent's identity); '' once gone."""
    try:
        current = refresh(principal)
    except NotFound:
        return ""
    return listing(current).fingerprint


def fingerprint_of(principal: Principal, functions: list[GatewayFunction]) -> str:
    """The fingerprint of a listing just made for a freshly resolved principal (no second query)."""
    listing = [f.wire() for f in functions]
    blob = json.dumps([principal.agent.name, principal.agent.description, listing], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def _secrets(principal: Principal, fn: GatewayFunction) -> list[str]:
    try:
        return list(tool_selectors.tool_snapshot(tenant=principal.tenant, tool_id=fn.function.tool_id).secrets)
    except ToolNotFound:
        return []  # deleted since the listing: nothing of it can be in a result any more


def redacted_arguments(principal: Principal, fn: GatewayFunction, arguments: dict[str, Any]) -> dict[str, Any]:
    redacted: dict[str, Any] = redact(arguments, _secrets(principal, fn))
    return redacted


def secrets_of(principal: Principal, fn: GatewayFunction | None) -> list[str]:
    """The secret values of the function's tool, which a result must never show."""
    return [] if fn is None else _secrets(principal, fn)
