"""Keep one BUILTIN tool row per tenant per registered built-in, idempotently."""

from __future__ import annotations

from django.db import transaction

from tenants_app.models import Tenant
from tools_app.models import FunctionState, Tool, ToolFunction, ToolStatus, ToolType
from tools_app.runtime.builtins import all_builtins
from tools_app.runtime.schemas import schema_hash


@transaction.atomic
def sync_builtin_tools(*, tenant: Tenant) -> dict[str, int]:
    """Add missing built-ins (dangerous ones DISABLED), refresh definitions, retire vanished ones."""
    specs = {s.name: s for s in all_builtins()}
    existing = {t.builtin_name: t for t in Tool.objects.select_for_update().filter(tenant=tenant, type=ToolType.BUILTIN)}
    counts = {"added": 0, "updated": 0, "retired": 0}
    for name, spec in specs.items():
        tool = existing.get(name)
        if tool is None:
            if Tool.objects.filter(tenant=tenant, name=name).exists():
                continue  # a user tool already holds the name; never overwrite it
            tool = Tool.objects.create(
                tenant=tenant, name=name, builtin_name=name, type=ToolType.BUILTIN, description=spec.description,
                safety=spec.safety, requires_approval=spec.requires_approval,
                status=ToolStatus.ENABLED if spec.default_enabled else ToolStatus.DISABLED,
            )
            counts["added"] += 1
        elif (tool.description, tool.safety) != (spec.description, spec.safety):
            tool.description, tool.safety = spec.description, spec.safety
            tool.save(update_fields=["description", "safety", "updated_at"])
            counts["updated"] += 1
        digest = schema_hash(name=spec.function_name, description=spec.description, input_schema=spec.input_schema,
                             output_schema=None, annotations=None)
        ToolFunction.objects.update_or_create(
            tool=tool, name=spec.function_name,
            defaults={"description": spec.description, "input_schema": spec.input_schema, "schema_hash": digest,
                      "approved_hash": digest, "state": FunctionState.ACTIVE},
        )
        tool.functions.exclude(name=spec.function_name).update(state=FunctionState.REMOVED)
    for name, tool in existing.items():
        if name not in specs:
            tool.functions.update(state=FunctionState.REMOVED)
            if tool.status != ToolStatus.DISABLED:
                tool.status = ToolStatus.DISABLED
                tool.save(update_fields=["status", "updated_at"])
            counts["retired"] += 1
    return counts


def sync_all_tenants() -> dict[str, int]:
    total = {"added": 0, "updated": 0, "retired": 0}
    for tenant in Tenant.objects.all():
        for key, value in sync_builtin_tools(tenant=tenant).items():
            total[key] += value
    return total
