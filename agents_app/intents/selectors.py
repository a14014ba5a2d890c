"""Intent tree reads: the tenant comes first."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, Max, Prefetch, QuerySet, Sum

from agents_app.models import IntentExample, IntentNode
from core.errors import NotFound
from tenants_app.models import Tenant


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise NotFound() from None


def _full(qs: QuerySet[IntentNode]) -> QuerySet[IntentNode]:
    return qs.select_related("parent").prefetch_related(
        Prefetch("examples", queryset=IntentExample.objects.order_by("position", "id")),
        "functions__tool",
    )


def intent_list(*, tenant: Tenant, filters: dict[str, str] | None = None) -> QuerySet[IntentNode]:
    qs = IntentNode.objects.filter(tenant=tenant)
    f = filters or {}
    for key in ("level", "kind", "status"):
        if f.get(key):
            qs = qs.filter(**{key: f[key]})
    if f.get("parent"):
        qs = qs.filter(parent__code=f["parent"])
    if f.get("q"):
        qs = qs.filter(name__icontains=f["q"]) | qs.filter(code__icontains=f["q"])
    return _full(qs).order_by("code", "id")


def intent_get(*, tenant: Tenant, intent_id: Any, for_update: bool = False) -> IntentNode:
    qs = IntentNode.objects.filter(tenant=tenant)
    qs = qs.select_for_update() if for_update else _full(qs)
    try:
        return qs.get(pk=_int(intent_id))
    except IntentNode.DoesNotExist:
        raise NotFound() from None


def intent_by_code(*, tenant: Tenant, code: str) -> IntentNode | None:
    return IntentNode.objects.filter(tenant=tenant, code=code).first()


def intents_by_codes(*, tenant: Tenant, codes: list[str]) -> dict[str, IntentNode]:
    return {n.code: n for n in IntentNode.objects.filter(tenant=tenant, code__in=codes)}


def tree_signature(*, tenant: Tenant) -> tuple[Any, ...]:
    """Changes whenever a node or example of the tenant's tree changes (services touch the node)."""
    agg = IntentNode.objects.filter(tenant=tenant).aggregate(
        n=Count("id"), last=Max("updated_at"), top=Max("id"), versions=Sum("version")
    )
    return (tenant.pk, agg["n"], agg["last"], agg["top"], agg["versions"])


def examples_to_embed(*, tenant: Tenant, node_id: int | None, model: str) -> list[tuple[int, str]]:
    """(example id, text) of the examples whose stored vector is missing or from another model."""
    qs = IntentExample.objects.filter(node__tenant=tenant)
    if node_id is not None:
        qs = qs.filter(node_id=node_id)
    stale = qs.filter(embedding__isnull=True) | qs.exclude(embedding_model=model)
    return list(stale.order_by("id").values_list("id", "text"))


def routing_rows(*, tenant: Tenant) -> tuple[list[dict[str, Any]], list[tuple[int, str, Any, str]],
                                              list[tuple[int, int, str, str]]]:
    """Plain rows to build a router from: nodes, examples (node id, text, vector, model), functions."""
    nodes: list[dict[str, Any]] = list(IntentNode.objects.filter(tenant=tenant).values(  # type: ignore[arg-type]
        "id", "code", "name", "level", "kind", "description", "parent_id", "status"))
    examples: list[tuple[int, str, Any, str]] = list(IntentExample.objects.filter(node__tenant=tenant).order_by("node_id", "position", "id")
                    .values_list("node_id", "text", "embedding", "embedding_model"))
    through = IntentNode.functions.through
    functions = list(through.objects.filter(intentnode__tenant=tenant, toolfunction__tool__tenant=tenant)
                     .values_list("intentnode_id", "toolfunction__tool_id", "toolfunction__tool__name",
                                  "toolfunction__name"))
    return nodes, examples, functions
