"""Keep one BUILTIN tool row per tenant per registered tool (built-ins, record tools, plugins), idempotently."""

from __future__ import annotations

from django.db import transaction

from tenants_app.models import Tenant
from tools_app.models import FunctionState, Tool, ToolFunction, ToolStatus, ToolType
from tools_app.runtime import registry
from tools_app.runtime.registry import ToolSpec

COUNTS = ("added", "updated", "retired", "removed")


def _specs(refresh: bool) -> tuple[dict[str, ToolSpec], bool]:
    """The registered tools, and whether every installed plugin loaded (only then may rows be removed)."""
    specs = {s.name: s for s in registry.all_tools(refresh=refresh)}
    return specs, not registry.plugin_errors()


@transaction.atomic
def sync_builtin_tools(*, tenant: Tenant, refresh: bool = False, new: bool = False) -> dict[str, int]:
    """Add missing tools (anything not READ_ONLY DISABLED), refresh definitions, drop vanished ones.

    A tool that is no longer registered (its plugin package was uninstalled) loses its row; its audit
    rows (ToolCall) stay, keeping the tool's name. While some installed plugin fails to load, a
    vanished tool is only retired (disabled, functions REMOVED): it may belong to the broken package.
    `refresh` re-reads the installed packages' entry points first. `new`: the tenant was inserted in this
    transaction a moment ago (its post_save), so it holds no tool yet: the two lookups of its tools are skipped.
    """
    specs, all_loaded = _specs(refresh)
    existing: dict[str, Tool] = {}
    taken: set[str] = set()
    if not new:
        existing = {t.builtin_name: t
                    for t in Tool.objects.select_for_update().filter(tenant=tenant, type=ToolType.BUILTIN)}
        # Names a tool of the tenant already holds, asked once (one query, not one per tool).
        taken = set(Tool.objects.filter(tenant=tenant, name__in=[n for n in specs if n not in existing])
                    .values_list("name", flat=True))
    counts = dict.fromkeys(COUNTS, 0)
    new_tools: list[tuple[Tool, ToolFunction]] = []
    for name, spec in specs.items():
        tool = existing.get(name)
        digest = spec.schema_digest
        function = {"description": spec.description, "input_schema": spec.input_schema, "schema_hash": digest,
                    "approved_hash": digest, "state": FunctionState.ACTIVE}
        if tool is None:
            if name in taken:
                continue  # a user tool already holds the name; never overwrite it
            tool = Tool(
                tenant=tenant, name=name, builtin_name=name, type=ToolType.BUILTIN, description=spec.description,
                safety=spec.safety, requires_approval=spec.requires_approval,
                status=ToolStatus.ENABLED if spec.default_enabled else ToolStatus.DISABLED,
            )
            new_tools.append((tool, ToolFunction(tool=tool, name=spec.function_name, **function)))  # its only one
            counts["added"] += 1
            continue
        if (tool.description, tool.safety) != (spec.description, spec.safety):
            tool.description, tool.safety = spec.description, spec.safety
            tool.save(update_fields=["description", "safety", "updated_at"])
            counts["updated"] += 1
        ToolFunction.objects.update_or_create(tool=tool, name=spec.function_name, defaults=function)
        tool.functions.exclude(name=spec.function_name).update(state=FunctionState.REMOVED)
    _create(new_tools)
    for name, tool in existing.items():
        if name in specs:
            continue
        if all_loaded:
            tool.delete()  # ToolCall.tool is SET_NULL: the audit history keeps the call and the tool's name
            counts["removed"] += 1
            continue
        tool.functions.update(state=FunctionState.REMOVED)
        if tool.status != ToolStatus.DISABLED:
            tool.status = ToolStatus.DISABLED
            tool.save(update_fields=["status", "updated_at"])
        counts["retired"] += 1
    return counts


def _create(new_tools: list[tuple[Tool, ToolFunction]]) -> None:
    """The new tools and their functions in one INSERT each (a new tenant gets every built-in: two statements, not
    two per tool, which made each tenant's creation cost ~20 saves). The bulk writes drop the tenant's hot-path
    snapshots as the saves' signals did (core.hotcache.TenantBumpingQuerySet)."""
    if not new_tools:
        return
    Tool.objects.bulk_create([tool for tool, _ in new_tools])  # sets each tool's pk (RETURNING): the functions' FK
    ToolFunction.objects.bulk_create([function for _, function in new_tools])


def sync_all_tenants(*, refresh: bool = False) -> dict[str, int]:
    total = dict.fromkeys(COUNTS, 0)
    if refresh:
        registry.discover(refresh=True)
    for tenant in Tenant.objects.all():
        for key, value in sync_builtin_tools(tenant=tenant).items():
            total[key] += value
    return total
