"""The record tools and show_data as plugins of the one tool registry, run as the calling user in their tenant."""

from __future__ import annotations

import json
from typing import Any

from tools_app.records import operations
from tools_app.records.args import CreateArgs, DeleteArgs, Query, ReadArgs, ShowDataArgs, UpdateArgs
from tools_app.records.permissions import VIEW, PermissionRefused, access
from tools_app.records.query import run_query
from tools_app.records.registry import registered
from tools_app.records.saved import saved_queries
from tools_app.records.show_data import show_data
from tools_app.runtime import registry
from tools_app.runtime.plugin import ApprovalCard, Safety, ToolContext, ToolPlugin
from tools_app.runtime.result import ToolResult

_BATCH = "One record or a batch of up to 100 in one call (one transaction: all or nothing; a failure names the item's index)."


def _dump(args: Any) -> dict[str, Any]:
    return dict(args.model_dump(by_alias=True, exclude_none=True, exclude_unset=True))


def _ok(data: dict[str, Any], **meta: Any) -> ToolResult:
    # Compact: what the model reads of a 100-record batch stays within the transcript's per-result cap.
    return ToolResult.ok(data=data, text=json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str),
                         **meta)


def _count(args: Any, one: str, many: str) -> int:
    plural = getattr(args, many, None)
    return len(plural) if plural is not None else (1 if getattr(args, one, None) is not None else 0)


class _RecordTool(ToolPlugin):
    requires_user = True  # records are read and written as someone, never as the system

    def _title(self, verb: str, args: Any, one: str, many: str) -> str:
        n = _count(args, one, many)
        return f"{verb} {n} {args.model} record{'s' if n != 1 else ''}"


class QueryRecords(_RecordTool):
    name = "query_records"
    description = (
        "Search the records of a registered model with a JSON filter (eq, ne, lt, lte, gt, gte, in, contains, "
        "isnull; nested and/or/not), free-text search, ordering, chosen fields, limit (<= 100) and offset, or "
        "grouped with aggregates (count, sum, avg, min, max). Returns {columns, rows, count, more}. Only what the "
        "user may read is searched; an unknown model, field or operator is refused naming what exists."
    )
    args_model = Query
    safety = Safety.READ_ONLY

    def execute(self, args: Query, ctx: ToolContext) -> ToolResult:
        return _ok(run_query(tenant=ctx.tenant, user=ctx.require_user(), query=_dump(args)))

    def call_title(self, args: Query, configured_name: str) -> str:
        return f"{configured_name}: {args.model}"

    def provide_context(self, ctx: ToolContext) -> str | None:
        """The models this user may read, with their fields: no call spent learning them."""
        if ctx.user is None:
            return None
        lines = []
        for spec in registered():
            try:
                access(spec, tenant=ctx.tenant, user=ctx.user, action=VIEW)
            except PermissionRefused:
                continue
            fields = ", ".join(
                f"{f['name']} ({f['type']}{': ' + '|'.join(map(str, f['choices'])) if 'choices' in f else ''})"
                for f in spec.describe()["fields"]
            )
            lines.append(f"- {spec.name}: {fields}")
        if not lines:
            return None
        return "Record models you can query (query_records, read_record, ...):\n" + "\n".join(lines)


class ReadRecord(_RecordTool):
    name = "read_record"
    description = (
        "Read records of a registered model by `id` or `ids` (up to 100). Ids that match nothing the user may "
        "read are listed under `missing`."
    )
    args_model = ReadArgs
    safety = Safety.READ_ONLY

    def execute(self, args: ReadArgs, ctx: ToolContext) -> ToolResult:
        return _ok(operations.read_records(tenant=ctx.tenant, user=ctx.require_user(), model=args.model, id=args.id,
                                           ids=args.ids, fields=args.fields))

    def call_title(self, args: ReadArgs, configured_name: str) -> str:
        return self._title("read", args, "id", "ids")


class CreateRecord(_RecordTool):
    name = "create_record"
    description = (
        "Create records of a registered model: `record` (field values) or `records` (a list). " + _BATCH +
        " Returns the records as stored. Unknown fields and values outside a field's choices are refused."
    )
    args_model = CreateArgs
    safety = Safety.WRITE

    def execute(self, args: CreateArgs, ctx: ToolContext) -> ToolResult:
        return _ok(operations.create_records(tenant=ctx.tenant, user=ctx.require_user(), model=args.model,
                                             record=args.record, records=args.records))

    def call_title(self, args: CreateArgs, configured_name: str) -> str:
        return self._title("create", args, "record", "records")


class UpdateRecord(_RecordTool):
    name = "update_record"
    description = (
        "Change records of a registered model: `record` ({id, field: value, ...}) or `records` (a list). " + _BATCH +
        " Answers each field set with its value before and after, as stored."
    )
    args_model = UpdateArgs
    safety = Safety.WRITE

    def execute(self, args: UpdateArgs, ctx: ToolContext) -> ToolResult:
        return _ok(operations.update_records(tenant=ctx.tenant, user=ctx.require_user(), model=args.model,
                                             record=args.record, records=args.records))

    def call_title(self, args: UpdateArgs, configured_name: str) -> str:
        return self._title("update", args, "record", "records")


class DeleteRecord(_RecordTool):
    name = "delete_record"
    description = (
        "Delete records of a registered model by `id` or `ids` (up to 100), in one transaction. Every id is checked "
        "before any is removed; ids that match nothing are listed under `missing` and the rest are deleted."
    )
    args_model = DeleteArgs
    safety = Safety.DESTRUCTIVE

    def execute(self, args: DeleteArgs, ctx: ToolContext) -> ToolResult:
        return _ok(operations.delete_records(tenant=ctx.tenant, user=ctx.require_user(), model=args.model,
                                             id=args.id, ids=args.ids))

    def call_title(self, args: DeleteArgs, configured_name: str) -> str:
        return self._title("delete", args, "id", "ids")

    def before_approval(self, args: DeleteArgs, ctx: ToolContext) -> ApprovalCard | None:
        """One card for the batch naming the records and their count; refused up front if any may not go."""
        try:
            text = operations.describe_delete(tenant=ctx.tenant, user=ctx.require_user(), model=args.model,
                                              id=args.id, ids=args.ids)
        except PermissionRefused as exc:
            return ApprovalCard.refused(exc.message)
        return ApprovalCard.show(text)


class ShowData(_RecordTool):
    name = "show_data"
    description = (
        "Answer with a chart (bar, line, pie), table, KPI, card, list, progress bars, flow or pivot instead of a "
        "markdown table. Give a saved query by `query_name` or an ad-hoc `query` shaped as query_records takes it, "
        "one `widget` and its `props` (columns of the query). Runs as the user, capped at 100 rows; the user sees "
        "the widget and you get the same rows, so do not repeat them as a table."
    )
    args_model = ShowDataArgs
    safety = Safety.READ_ONLY

    def execute(self, args: ShowDataArgs, ctx: ToolContext) -> ToolResult:
        data = show_data(tenant=ctx.tenant, user=ctx.require_user(), query_name=args.query_name,
                         query=_dump(args.query) if args.query is not None else None, widget=args.widget,
                         props=dict(args.props))
        return _ok(data, shown=True)

    def call_title(self, args: ShowDataArgs, configured_name: str) -> str:
        what = args.query_name or (args.query.model if args.query else "")
        return f"{configured_name}: {args.widget} of {what}"

    def provide_context(self, ctx: ToolContext) -> str | None:
        saved = saved_queries()
        if not saved:
            return None
        return "Saved queries for show_data (query_name):\n" + "\n".join(
            f"- {s.name}: {s.description or s.query.get('model')}" for s in saved)


RECORD_TOOLS: tuple[type[ToolPlugin], ...] = (QueryRecords, ReadRecord, CreateRecord, UpdateRecord, DeleteRecord,
                                              ShowData)


def register_record_tools() -> None:
    """Put the record tools and show_data in the one registry (idempotent: a reloaded app replaces them)."""
    for tool in RECORD_TOOLS:
        registry.register(tool, source="host", replace_existing=True)
