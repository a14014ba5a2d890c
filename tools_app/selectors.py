"""Tool reads: the tenant comes first, always."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from types import MappingProxyType
from typing import Any

from django.db.models import Prefetch, QuerySet
from django.utils import timezone

from core import hotcache
from core.errors import NotFound
from core.ids import as_id
from tenants_app.models import Tenant
from tools_app.configs import secret_values
from tools_app.configs.auth import declared_keys, is_oauth_tool, is_per_user
from tools_app.errors import ToolNotFound
from tools_app.models import (
    Approval,
    ApprovalStatus,
    FunctionState,
    OAuthConnection,
    Quota,
    Tool,
    ToolCall,
    ToolFunction,
    ToolType,
    UserCredential,
)
from tools_app.policies import USE_TOOL, approval_rows, approvals_decidable, approvals_visible


@dataclass(frozen=True)
class ToolFilters:
    name: str = ""
    type: str = ""
    status: str = ""
    keyword: str = ""

    @classmethod
    def from_query(cls, params: Any) -> ToolFilters:
        return cls(
            name=params.get("name", "").strip(),
            type=params.get("type", "").strip().upper(),
            status=params.get("status", "").strip().upper(),
            keyword=params.get("keyword", "").strip(),
        )

    def apply(self, qs: QuerySet[Tool]) -> QuerySet[Tool]:
        if self.name:
            qs = qs.filter(name__icontains=self.name)
        if self.keyword:
            qs = qs.filter(name__icontains=self.keyword) | qs.filter(description__icontains=self.keyword)
        if self.type:
            qs = qs.filter(type=self.type)
        if self.status:
            qs = qs.filter(status=self.status)
        return qs


def tool_list(*, tenant: Tenant, filters: ToolFilters | None = None) -> QuerySet[Tool]:
    qs = Tool.objects.filter(tenant=tenant).prefetch_related("functions")
    return (filters or ToolFilters()).apply(qs).order_by("name", "id")


def tool_get(*, tenant: Tenant, tool_id: Any) -> Tool:
    try:
        return Tool.objects.get(tenant=tenant, pk=as_id(tool_id) or 0)
    except Tool.DoesNotExist:
        raise ToolNotFound() from None


@dataclass(frozen=True)
class ToolSnapshot:
    """A tool as the hot path reads it: the row (config decrypted once), its functions, its secret values.

    Shared by the process's threads: read it, never change it. `tool()` hands out a private copy.
    """

    row: Tool
    functions: Mapping[str, ToolFunction]
    secrets: tuple[str, ...]

    def tool(self, tenant: Tenant) -> Tool:
        tool = copy.copy(self.row)
        tool.tenant = tenant  # the caller's own tenant object, never one shared across requests
        return tool


def tool_snapshot(*, tenant: Tenant, tool_id: Any, fresh: bool = False) -> ToolSnapshot:
    """The tool and its functions from this process's memory while nothing in the tenant changed
    (core.hotcache), or from the database when `fresh`; ToolNotFound alike for a missing and another
    tenant's tool."""
    pk = as_id(tool_id)

    def load() -> ToolSnapshot | None:
        tool = Tool.objects.filter(tenant=tenant, pk=pk or 0).prefetch_related("functions").first()
        if tool is None:
            return None
        functions = {f.name: f for f in tool.functions.all()}
        return ToolSnapshot(row=tool, functions=MappingProxyType(functions),
                            secrets=tuple(secret_values(tool.type, tool.config)))

    if pk is None:
        found = None
    elif fresh:
        found = load()
    else:
        found = hotcache.remembered("tool", (tenant.pk, pk), (hotcache.tenant_scope(tenant.pk),), load)
    if found is None:
        raise ToolNotFound()
    return found


def tool_market(*, tenant: Tenant, tool_id: Any) -> Tool | None:
    """The tool's market link as it stands now (its loaded hash and entry), in one query."""
    return Tool.objects.filter(tenant=tenant, pk=as_id(tool_id) or 0).select_related("market_entry").first()


def tool_get_for_update(*, tenant: Tenant, tool_id: Any) -> Tool:
    try:
        return Tool.objects.select_for_update().get(tenant=tenant, pk=as_id(tool_id) or 0)
    except Tool.DoesNotExist:
        raise ToolNotFound() from None


def tool_options(*, tenant: Tenant, user: Any) -> QuerySet[Tool]:
    active = ToolFunction.objects.filter(state=FunctionState.ACTIVE, enabled=True).order_by("name")
    return (
        USE_TOOL.tools(tenant=tenant, user=user)
        .prefetch_related(Prefetch("functions", queryset=active, to_attr="active_functions"))
        .order_by("name")
    )


def tools_by_ids(*, tenant: Tenant, ids: list[int]) -> QuerySet[Tool]:
    return Tool.objects.filter(tenant=tenant, pk__in=ids)


def builtin_tools(*, tenant: Tenant) -> QuerySet[Tool]:
    return Tool.objects.filter(tenant=tenant, type=ToolType.BUILTIN)


def tool_call_list(*, tenant: Tenant, tool: str = "", status: str = "") -> QuerySet[ToolCall]:
    qs = ToolCall.objects.filter(tenant=tenant).select_related("actor")
    if tool:
        qs = qs.filter(tool_name=tool) if not tool.isdigit() else qs.filter(tool_id=as_id(tool) or 0)
    if status:
        qs = qs.filter(status=status)
    return qs


# --- approvals ------------------------------------------------------------------------------------


def approval_list(*, tenant: Tenant, user: Any, status: str = "") -> QuerySet[Approval]:
    """What the user may decide, newest first; `pending` leaves out requests already past their expiry."""
    qs = approvals_decidable(tenant=tenant, user=user)
    if status:
        qs = qs.filter(status=status)
        if status == ApprovalStatus.PENDING:
            qs = qs.filter(expires_at__gt=timezone.now())
    return qs.order_by("-created_at", "-id")


def approval_get_visible(*, tenant: Tenant, user: Any, approval_id: Any, for_update: bool = False) -> Approval:
    """An approval the user may read; a foreign, hidden or missing one is the same NotFound."""
    qs = approvals_visible(tenant=tenant, user=user)
    if for_update:
        qs = qs.select_for_update(of=("self",))
    try:
        return qs.get(pk=int(approval_id))
    except (Approval.DoesNotExist, ValueError, TypeError, OverflowError):
        raise NotFound() from None


def approvals_of(*, tenant: Tenant, ids: list[int], pending_only: bool = False) -> QuerySet[Approval]:
    qs = approval_rows(tenant).filter(pk__in=ids)
    if pending_only:
        qs = qs.filter(status=ApprovalStatus.PENDING)
    return qs.order_by("id")


def oauth_state(*, tenant: Tenant, tool: Tool, user: Any) -> dict[str, Any] | None:
    """The detail's `oauth` block as this caller sees it: the shared connection, or their own (per_user)."""
    if not is_oauth_tool(tool):
        return None
    per_user = is_per_user(tool)
    connection = OAuthConnection.objects.filter(tenant=tenant, tool_id=tool.pk, user=user if per_user else None).first()
    status = connection.status if connection is not None else "not_connected"
    return {"type": "oauth2", "per_user": per_user, "connected": status == "connected", "status": status,
            "scopes": connection.scopes.split() if connection is not None else [],
            "expires_at": connection.expires_at.isoformat() if connection and connection.expires_at else None}


def user_credential(*, tool_id: int, user_id: int) -> UserCredential | None:
    """A member's own values for a tool's per-user keys (the caller has already been scoped to the tool)."""
    return UserCredential.objects.filter(tool_id=tool_id, user_id=user_id).first()


@dataclass(frozen=True)
class UserKeys:
    """A tool's per-user keys as one member has them: the one place "which are missing" is decided."""

    declared: list[str]
    values: dict[str, str]
    updated_at: datetime | None

    @property
    def present(self) -> list[str]:
        return [key for key in self.declared if self.values.get(key)]

    @property
    def missing(self) -> list[str]:
        return [key for key in self.declared if not self.values.get(key)]


def user_keys(*, tool: Tool, user: Any) -> UserKeys | None:
    """This member's values for the tool's per-user keys; None for a tool without such keys (no query)."""
    declared = declared_keys(tool)
    if not declared:
        return None
    user_id = getattr(user, "pk", None)
    stored = user_credential(tool_id=tool.pk, user_id=user_id) if user_id is not None else None
    values = {str(k): str(v) for k, v in ((stored.values if stored is not None else None) or {}).items() if v}
    return UserKeys(declared, values, stored.updated_at if stored is not None else None)


def user_credentials_state(*, tool: Tool, user: Any) -> dict[str, Any] | None:
    """The detail's `my_credentials` block: which of the tool's per-user keys this caller has set, never a value."""
    keys = user_keys(tool=tool, user=user)
    if keys is None:
        return None
    return {"keys": keys.declared, "set": keys.present, "missing": keys.missing, "complete": not keys.missing,
            "updated_at": keys.updated_at.isoformat() if keys.updated_at is not None else None}


def member_connections(*, tenant: Tenant, user: Any) -> list[dict[str, Any]]:
    """The tools this member may use that need a connection or keys: OAuth tools (shared or their own) and tools
    with per-user keys, each with the member's view of it (`oauth`, `my_credentials`). Configs are encrypted, so
    the filter runs here, not in SQL."""
    rows = []
    tools = USE_TOOL.tools(tenant=tenant, user=user).filter(type__in=(ToolType.LOCAL, ToolType.REMOTE, ToolType.HTTP))
    for tool in tools.order_by("name"):
        oauth = oauth_state(tenant=tenant, tool=tool, user=user)
        keys = user_credentials_state(tool=tool, user=user)
        if oauth is not None or keys is not None:
            rows.append({"tool": tool, "oauth": oauth, "my_credentials": keys})
    return rows


def user_secret_values(*, tool: Tool) -> list[str]:
    """Every member's values for a tool's per-user keys (the scrubber masks them); none for other tools (no query)."""
    if not declared_keys(tool):
        return []
    return [str(v) for values in UserCredential.objects.filter(tool=tool).values_list("values", flat=True)
            for v in (values or {}).values() if v]


def live_secret_values(*, tenant: Tenant, tool: Tool) -> list[str]:
    """The secrets of a tool that live outside its config and change without a config change (OAuth tokens, every
    member's own keys): read fresh for each scrubbing; no query for a tool that has neither."""
    return oauth_token_values(tenant=tenant, tool=tool) + user_secret_values(tool=tool)


def oauth_token_values(*, tenant: Tenant, tool: Tool) -> list[str]:
    """The tokens of a tool's OAuth connections (the scrubber masks them); none for other tools (no query)."""
    if not is_oauth_tool(tool):
        return []
    values: list[str] = []
    for tokens in OAuthConnection.objects.filter(tenant=tenant, tool=tool).values_list("tokens", flat=True):
        values += [str(v) for v in (tokens or {}).values() if v]
    return values


def quota_list(*, tenant: Tenant) -> QuerySet[Quota]:
    return Quota.objects.filter(tenant=tenant).order_by("scope", "target", "id")


def quota_get(*, tenant: Tenant, quota_id: Any) -> Quota:
    """One quota of `tenant`; another tenant's answers as a missing one."""
    pk = as_id(quota_id)
    found = quota_list(tenant=tenant).filter(pk=pk).first() if pk is not None else None
    if found is None:
        raise NotFound()
    return found
