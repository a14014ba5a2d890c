"""One read of a registered model, as query_records and show_data run it: as the user, capped, strictly checked."""

from __future__ import annotations

import re
from typing import Any

from django.db.models import Avg, Count, Max, Min, Q, QuerySet, Sum

from core.errors import InvalidParams
from tenants_app.models import Tenant
from tools_app.records.args import MAX_ROWS
from tools_app.records.filters import compile_filter
from tools_app.records.permissions import VIEW, access
from tools_app.records.registry import BOOLEAN, INTEGER, NUMBER, REFERENCE, RecordModel, get_record_model
from tools_app.records.values import json_value

AGGREGATES: dict[str, Any] = {"count": Count, "sum": Sum, "avg": Avg, "min": Min, "max": Max}
_ALIAS = re.compile(r"^[a-z_][a-z0-9_]{0,39}$")


def check_fields(spec: RecordModel, names: list[str], *, where: str) -> list[str]:
    unknown = [n for n in names if n not in spec.fields]
    if unknown:
        raise InvalidParams(f"{where}: {spec.name} has no field(s) {', '.join(map(repr, unknown))}; "
                            f"fields: {', '.join(spec.fields)}",
                            details={"unknown": unknown, "accepted": list(spec.fields)})
    return names


def run_query(*, tenant: Tenant, user: Any, query: dict[str, Any], max_rows: int = MAX_ROWS) -> dict[str, Any]:
    """`query` is a Query dumped by alias. Returns {model, columns, rows, count, limit, offset, more}."""
    spec = get_record_model(query["model"])
    qs: QuerySet[Any] = access(spec, tenant=tenant, user=user, action=VIEW).rows
    if query.get("filter") is not None:
        qs = qs.filter(compile_filter(spec, query["filter"]))
    if query.get("search"):
        if not spec.search_fields:
            raise InvalidParams(f"search: {spec.name} has no search fields; use a filter on: {', '.join(spec.fields)}")
        match = Q()
        for name in spec.search_fields:
            match |= Q(**{f"{name}__icontains": query["search"]})
        qs = qs.filter(match)
    limit = min(int(query.get("limit") or 20), max_rows)
    offset = int(query.get("offset") or 0)
    grouped = bool(query.get("group_by") or query.get("aggregates"))
    if grouped:
        if query.get("fields"):
            raise InvalidParams("fields: not with group_by/aggregates (the columns are the groups and aggregates)")
        columns, qs = _grouped(spec, qs, query)
    else:
        columns = check_fields(spec, list(query.get("fields") or spec.fields), where="fields")
        qs = qs.values(*columns)
    qs = qs.order_by(*_ordering(spec, query.get("ordering"), columns, grouped))
    total = qs.count() if query.get("group_by") or not grouped else 1
    rows = [{k: json_value(v) for k, v in r.items()} for r in qs[offset:offset + limit]]
    return {"model": spec.name, "columns": columns, "rows": rows, "count": total, "limit": limit, "offset": offset,
            "more": offset + len(rows) < total}


def _grouped(spec: RecordModel, qs: QuerySet[Any], query: dict[str, Any]) -> tuple[list[str], QuerySet[Any]]:
    group_by = check_fields(spec, list(query.get("group_by") or []), where="group_by")
    aggregates = list(query.get("aggregates") or [])
    if not aggregates:
        aggregates = [{"fn": "count", "as": "count"}]
    annotations: dict[str, Any] = {}
    for i, agg in enumerate(aggregates):
        where = f"aggregates[{i}]"
        fn, name, alias = agg.get("fn"), agg.get("field"), agg.get("as")
        if fn not in AGGREGATES:
            raise InvalidParams(f"{where}: fn {fn!r} is not one of {', '.join(AGGREGATES)}")
        if not isinstance(alias, str) or not _ALIAS.match(alias) or alias in spec.fields or alias in annotations:
            raise InvalidParams(f"{where}: 'as' must be a new column name (lower-case letters, digits, _), "
                                f"not a field of {spec.name} nor used twice; got {alias!r}")
        if name is None:
            if fn != "count":
                raise InvalidParams(f"{where}: {fn} needs a field")
            annotations[alias] = Count("pk")
            continue
        check_fields(spec, [name], where=where)
        kind = spec.kind(name)
        if fn in ("sum", "avg") and kind not in (INTEGER, NUMBER):
            raise InvalidParams(f"{where}: {fn} needs a number field; {name!r} is {kind}")
        if kind == BOOLEAN and fn in ("min", "max"):
            raise InvalidParams(f"{where}: {fn} of a boolean field; count with a filter instead")
        column = spec.model_field(name).attname if kind == REFERENCE else ("pk" if name == "id" else name)
        annotations[alias] = AGGREGATES[fn](column)
    if group_by:
        return [*group_by, *annotations], qs.values(*group_by).annotate(**annotations)
    # No groups: one row of totals (an aggregate over an empty set is null, a count 0).
    return list(annotations), _Totals(qs, annotations)  # type: ignore[return-value]


class _Totals:
    """A one-row 'queryset' of overall aggregates, so the caller can order, count and slice it the same way."""

    def __init__(self, qs: QuerySet[Any], annotations: dict[str, Any]) -> None:
        self._qs, self._annotations = qs, annotations

    def order_by(self, *_: Any) -> _Totals:
        return self

    def count(self) -> int:
        return 1

    def __getitem__(self, item: slice) -> list[dict[str, Any]]:
        return [self._qs.aggregate(**self._annotations)][item]


def _ordering(spec: RecordModel, ordering: list[str] | None, columns: list[str], grouped: bool) -> list[str]:
    if not ordering:
        return [c for c in columns if c in spec.fields] if grouped else ["pk"]
    allowed = columns if grouped else list(spec.fields)
    out = []
    for item in ordering:
        name = item[1:] if item.startswith("-") else item
        if name not in allowed:
            raise InvalidParams(f"ordering: cannot order by {name!r}; it takes {', '.join(allowed)} "
                                "('-' in front for descending)", details={"accepted": allowed})
        if name == "id" and not grouped:
            column = "pk"
        elif name in spec.fields and spec.kind(name) == REFERENCE:
            column = spec.model_field(name).attname  # the id itself, never the related model's own ordering
        else:
            column = name
        out.append(("-" if item.startswith("-") else "") + column)
    if not grouped and "pk" not in out and "-pk" not in out:
        out.append("pk")  # a stable order for paging
    return out
