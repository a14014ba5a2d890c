"""show_data: run a saved or ad-hoc query as the user (≤100 rows) and check one widget's props against its columns."""

from __future__ import annotations

from typing import Any

from core.errors import InvalidParams
from tenants_app.models import Tenant
from tools_app.records.args import MAX_ROWS
from tools_app.records.query import run_query
from tools_app.records.saved import get_saved_query

CHART_TYPES = ("bar", "line", "pie")
NUMBER_OR_COLUMN = "number-or-column"

# Per widget: prop -> what it holds ("column", "columns", "column-or-columns", "text", a tuple of choices, ...),
# and which props are required. A prop not listed is refused naming those that are.
WIDGETS: dict[str, tuple[dict[str, Any], tuple[str, ...]]] = {
    "chart": ({"type": CHART_TYPES, "x": "column", "y": "column-or-columns", "title": "text"}, ("type", "x", "y")),
    "table": ({"columns": "columns", "title": "text"}, ()),
    "kpi": ({"value": "column", "label": "text", "unit": "text", "title": "text"}, ("value",)),
    "card": ({"title": "column", "fields": "columns"}, ("title",)),
    "list": ({"primary": "column", "secondary": "column", "title": "text"}, ("primary",)),
    "progress": ({"value": "column", "max": NUMBER_OR_COLUMN, "label": "column", "title": "text"}, ("value", "max")),
    "flow": ({"step": "column", "value": "column", "stages": "texts", "title": "text"}, ("step",)),
    "pivot": ({"rows": "column", "columns": "column", "value": "column", "agg": ("sum", "count"), "title": "text"},
              ("rows", "columns")),
}


def check_props(widget: str, props: dict[str, Any], columns: list[str]) -> dict[str, Any]:
    accepted, required = WIDGETS[widget]
    unknown = sorted(set(props) - set(accepted))
    if unknown:
        raise InvalidParams(f"props: {widget} takes no {', '.join(map(repr, unknown))}; it takes "
                            f"{', '.join(accepted)}", details={"unknown": unknown, "accepted": list(accepted)})
    absent = [p for p in required if p not in props]
    if absent:
        raise InvalidParams(f"props: {widget} needs {', '.join(map(repr, absent))}",
                            details={"required": list(required)})
    for name, value in props.items():
        _check_prop(accepted[name], f"props.{name}", value, columns)
    return props


def _check_prop(kind: Any, where: str, value: Any, columns: list[str]) -> None:
    """One prop's value against what it holds (`kind`: a WIDGETS entry)."""
    if isinstance(kind, tuple):
        if value not in kind:
            raise InvalidParams(f"{where}: {value!r} is not one of {', '.join(kind)}")
    elif kind == "text":
        if not isinstance(value, str):
            raise InvalidParams(f"{where}: a string")
    elif kind == "texts":
        if not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
            raise InvalidParams(f"{where}: a list of strings")
    elif kind == NUMBER_OR_COLUMN:
        if not (isinstance(value, (int, float)) and not isinstance(value, bool)):
            _columns(where, [value], columns)
    else:
        many = value if isinstance(value, list) and kind in ("columns", "column-or-columns") else [value]
        if kind == "column" and isinstance(value, list):
            raise InvalidParams(f"{where}: one column name; columns: {', '.join(columns)}")
        _columns(where, many, columns)


def _columns(where: str, names: list[Any], columns: list[str]) -> None:
    bad = [n for n in names if n not in columns]
    if bad or not names:
        raise InvalidParams(f"{where}: the query has no column(s) {bad}; columns: {', '.join(columns)}",
                            details={"accepted": columns})


def show_data(*, tenant: Tenant, user: Any, query_name: str | None, query: dict[str, Any] | None,
              widget: str, props: dict[str, Any]) -> dict[str, Any]:
    if (query_name is None) == (query is None):
        raise InvalidParams("pass 'query_name' (a saved query) or 'query' (an ad-hoc one), exactly one",
                            details={"exactly_one_of": ["query_name", "query"]})
    spec = get_saved_query(query_name).query if query_name is not None else dict(query or {})
    if "limit" not in spec:
        spec["limit"] = MAX_ROWS
    result = run_query(tenant=tenant, user=user, query=spec, max_rows=MAX_ROWS)
    check_props(widget, props, result["columns"])
    return {**result, "widget": {"type": widget, "props": props},
            **({"query_name": query_name} if query_name else {})}
