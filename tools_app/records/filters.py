"""The JSON filter of query_records compiled to a Q, refusing anything the query cannot express.

A filter is a condition `{"field", "op", "value"}` or a group `{"and": [...]}` / `{"or": [...]}` /
`{"not": filter}`, nested to any depth within the caps below.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Q

from core.errors import InvalidParams
from tools_app.records.registry import (
    BOOLEAN,
    DATE,
    DATETIME,
    INTEGER,
    NUMBER,
    REFERENCE,
    TEXT,
    RecordModel,
)
from tools_app.records.values import field_value

OPERATORS = ("eq", "ne", "lt", "lte", "gt", "gte", "in", "contains", "isnull")
_ORDERED = ("eq", "ne", "lt", "lte", "gt", "gte", "in", "isnull")
OPERATORS_BY_KIND: dict[str, tuple[str, ...]] = {
    TEXT: OPERATORS,
    INTEGER: _ORDERED,
    NUMBER: _ORDERED,
    DATE: _ORDERED,
    DATETIME: _ORDERED,
    BOOLEAN: ("eq", "ne", "isnull"),
    REFERENCE: ("eq", "ne", "in", "isnull"),
}
CHOICE_OPERATORS = ("eq", "ne", "in", "isnull")
MAX_DEPTH = 8
MAX_CONDITIONS = 50
MAX_IN_VALUES = 100
_LOOKUP = {"eq": "exact", "lt": "lt", "lte": "lte", "gt": "gt", "gte": "gte", "in": "in", "contains": "icontains"}


def operators_for(spec: RecordModel, name: str) -> tuple[str, ...]:
    if spec.choices(name) is not None:
        return CHOICE_OPERATORS
    return OPERATORS_BY_KIND.get(spec.kind(name), ("eq", "ne", "isnull"))


class _Budget:
    def __init__(self) -> None:
        self.conditions = 0


def compile_filter(spec: RecordModel, node: Any, *, where: str = "filter") -> Q:
    return _compile(spec, node, where, 0, _Budget())


def _compile(spec: RecordModel, node: Any, where: str, depth: int, budget: _Budget) -> Q:
    if depth > MAX_DEPTH:
        raise InvalidParams(f"{where}: nested deeper than {MAX_DEPTH} levels")
    if not isinstance(node, dict):
        raise InvalidParams(f"{where}: a filter is an object: a condition {{field, op, value}} or a group "
                            "{and: [...]} / {or: [...]} / {not: {...}}")
    groups = [k for k in ("and", "or", "not") if k in node]
    if groups:
        extra = sorted(set(node) - {groups[0]})
        if len(groups) > 1 or extra:
            raise InvalidParams(f"{where}: a group has exactly one key (and, or or not); got {sorted(node)}")
        key = groups[0]
        if key == "not":
            return ~_compile(spec, node["not"], f"{where}.not", depth + 1, budget)
        items = node[key]
        if not isinstance(items, list) or not items:
            raise InvalidParams(f"{where}.{key}: a non-empty list of filters")
        out = Q()
        for i, item in enumerate(items):
            q = _compile(spec, item, f"{where}.{key}[{i}]", depth + 1, budget)
            out = (out & q) if key == "and" else (out | q) if i else q
        return out
    return _condition(spec, node, where, budget)


def _condition(spec: RecordModel, node: dict[str, Any], where: str, budget: _Budget) -> Q:
    extra = sorted(set(node) - {"field", "op", "value"})
    if extra or "field" not in node or "op" not in node:
        raise InvalidParams(f"{where}: a condition has keys field, op and value (value not for isnull); "
                            f"got {sorted(node)}; a group has one key: and, or or not")
    budget.conditions += 1
    if budget.conditions > MAX_CONDITIONS:
        raise InvalidParams(f"{where}: more than {MAX_CONDITIONS} conditions in one filter")
    name, op, value = node["field"], node["op"], node.get("value")
    _check_operator(spec, name, op, where)
    column = spec.model_field(name).attname if spec.kind(name) == REFERENCE else name
    if name == "id":
        column = "pk"
    return _lookup(spec, name, column, op, value, where)


def _check_operator(spec: RecordModel, name: Any, op: Any, where: str) -> None:
    """The field is one of the model's and takes the operator; refusals name what is accepted."""
    if not isinstance(name, str) or name not in spec.fields:
        raise InvalidParams(f"{where}: {spec.name} has no field {name!r}; fields: {', '.join(spec.fields)}",
                            details={"field": name, "accepted": list(spec.fields)})
    allowed = operators_for(spec, name)
    if op not in allowed:
        what = "choice" if spec.choices(name) is not None else spec.kind(name)
        raise InvalidParams(f"{where}: operator {op!r} does not apply to {what} field {name!r}; "
                            f"it takes {', '.join(allowed)}",
                            details={"field": name, "op": op, "accepted": list(allowed)})


def _lookup(spec: RecordModel, name: str, column: str, op: str, value: Any, where: str) -> Q:
    """The Q of one checked condition, its value converted to the field's type."""
    if op == "isnull":
        if not isinstance(value, bool):
            raise InvalidParams(f"{where}: isnull takes value true or false")
        return Q(**{f"{column}__isnull": value})
    if op == "in":
        if not isinstance(value, list) or not value or len(value) > MAX_IN_VALUES:
            raise InvalidParams(f"{where}: 'in' takes a list of 1 to {MAX_IN_VALUES} values")
        converted = [_value(spec, name, v, f"{where}.value[{i}]") for i, v in enumerate(value)]
        return Q(**{f"{column}__in": converted})
    if value is None:
        raise InvalidParams(f"{where}: {op!r} needs a value; to match empty fields use op 'isnull'")
    if op == "contains":
        if not isinstance(value, str):
            raise InvalidParams(f"{where}: 'contains' takes a string")
        return Q(**{f"{column}__icontains": value})
    q = Q(**{f"{column}__{_LOOKUP.get(op, 'exact')}": _value(spec, name, value, f"{where}.value")})
    return ~q if op == "ne" else q


def _value(spec: RecordModel, name: str, value: Any, where: str) -> Any:
    if value is None:
        raise InvalidParams(f"{where}: null is not a value to compare; use op 'isnull'")
    return field_value(spec, name, value, where=where)
