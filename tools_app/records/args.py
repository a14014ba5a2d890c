"""The record tools' arguments as pydantic types: their JSON Schemas are what the model is asked for."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, JsonValue

from tools_app.runtime.plugin import ToolArgs

# A record's field values are a free-form map whose values the model's own fields check (strictly, naming
# the field): `Any` keeps the schema open there instead of validating every value against JsonValue twice.
FieldValues = dict[str, Any]

MAX_BATCH = 100
MAX_ROWS = 100

Operator = Literal["eq", "ne", "lt", "lte", "gt", "gte", "in", "contains", "isnull"]


class Condition(ToolArgs):
    """One comparison: `field` `op` `value` (a list for `in`, true/false for `isnull`)."""

    field: str = Field(description="A field of the model")
    op: Operator = Field(description="contains is case-insensitive and for text; in takes a list")
    value: JsonValue = None


class Group(ToolArgs):
    """All of (`and`), any of (`or`) or none of (`not`) the filters inside; exactly one key."""

    and_: list[Filter] | None = Field(default=None, alias="and")
    or_: list[Filter] | None = Field(default=None, alias="or")
    not_: Filter | None = Field(default=None, alias="not")


Filter = Condition | Group
Group.model_rebuild()

AggregateFn = Literal["count", "sum", "avg", "min", "max"]


class Aggregate(ToolArgs):
    fn: AggregateFn
    field: str | None = Field(default=None, description="The field to aggregate (not needed for count)")
    as_: str = Field(alias="as", description="The column name of the result")


class Query(ToolArgs):
    """A read of one registered model: filter, free-text search, ordering, columns, paging or grouping."""

    model: str = Field(description="A registered record model (an unknown name is refused listing the models)")
    filter: Filter | None = None
    search: str | None = Field(default=None, description="Case-insensitive text matched in the model's search fields")
    fields: list[str] | None = Field(default=None, description="Columns to return (default: every field)")
    ordering: list[str] | None = Field(default=None, description="Field names, '-' in front for descending")
    limit: int = Field(default=20, ge=1, le=MAX_ROWS)
    offset: int = Field(default=0, ge=0)
    group_by: list[str] | None = Field(default=None, description="Group rows by these fields (with aggregates)")
    aggregates: list[Aggregate] | None = Field(default=None, description="Computed columns, per group or overall")


class ReadArgs(ToolArgs):
    model: str = Field(description="A registered record model")
    id: int | None = None
    ids: list[int] | None = Field(default=None, max_length=MAX_BATCH)
    fields: list[str] | None = Field(default=None, description="Columns to return (default: every field)")


class CreateArgs(ToolArgs):
    model: str = Field(description="A registered record model")
    record: FieldValues | None = Field(default=None, description="Field values of one new record")
    records: list[FieldValues] | None = Field(default=None, max_length=MAX_BATCH,
                                                       description="Several new records, written all or none")


class UpdateArgs(ToolArgs):
    model: str = Field(description="A registered record model")
    record: FieldValues | None = Field(default=None, description="`id` plus the field values to set")
    records: list[FieldValues] | None = Field(default=None, max_length=MAX_BATCH,
                                                       description="Several updates (each with its id), all or none")


class DeleteArgs(ToolArgs):
    model: str = Field(description="A registered record model")
    id: int | None = None
    ids: list[int] | None = Field(default=None, max_length=MAX_BATCH)


Widget = Literal["chart", "table", "kpi", "card", "list", "progress", "flow", "pivot"]


class ShowDataArgs(ToolArgs):
    query_name: str | None = Field(default=None, description="A saved query, by name")
    query: Query | None = Field(default=None, description="An ad-hoc query, shaped as query_records takes it")
    widget: Widget
    props: FieldValues = Field(default_factory=dict, description=(
        "chart: {type: bar|line|pie, x, y (column or list), title}; table: {columns, title}; "
        "kpi: {value, label, unit}; card: {title, fields}; list: {primary, secondary}; "
        "progress: {value, max (number or column), label}; flow: {step, value, stages}; "
        "pivot: {rows, columns, value, agg: sum|count}"))
