"""The audit row of one call: arguments redacted, results cut to the audit size, secrets scrubbed, and spooled
when the database is away. Every caller (invoke, approvals, the gateway's prompts and resources) writes through
`audit`; it imports neither invoke nor approvals, so neither needs a late import to reach it."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from django.conf import settings
from django.db import connections, models, router, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models.fields import Field
from django.db.models.signals import post_save, pre_save
from django.utils import timezone

from core.exceptions import unavailable_service
from core.secrets import redact, scrub_text
from tenants_app.models import Tenant
from tools_app.models import CallStatus, Tool, ToolCall
from tools_app.runtime.content import excerpt
from tools_app.runtime.result import ToolResult
from tools_app.runtime.screen.results import markers_of
from tools_app.services import audit_spool

logger = logging.getLogger(__name__)

# The OAuth client a call came through (the gateway sets it around an OAuth-authenticated request's work), named
# on every audit row written meanwhile: the call itself, a refusal, a hold for approval.
_CLIENT: ContextVar[str] = ContextVar("toolhub_audit_client", default="")


@contextmanager
def through_client(name: str) -> Iterator[None]:
    """Audit rows written inside name `name` as the client the calls came through ("" for none)."""
    token = _CLIENT.set(name[:200])
    try:
        yield
    finally:
        _CLIENT.reset(token)


def content_excerpt(content: list[dict[str, Any]], cap: int, secrets: list[str]) -> list[dict[str, Any]] | None:
    """The content list for the audit row: long strings cut, then blocks dropped until it fits `cap` chars."""
    if not content:
        return None
    blocks = excerpt(redact(content, secrets))  # scrubbed before any cut
    kept: list[dict[str, Any]] = []
    used = 0
    for block in blocks:
        size = len(json.dumps(block, default=str))
        if used + size > cap:
            kept.append({"type": "omitted", "blocks": len(blocks) - len(kept)})
            break
        kept.append(block)
        used += size
    return kept


def logs_excerpt(logs: Any, cap: int, secrets: list[str]) -> list[dict[str, Any]] | None:
    """The server's log messages sent during the call, newest kept when over `cap` chars."""
    if not logs:
        return None
    kept: list[dict[str, Any]] = []
    used = 0
    for entry in reversed(redact(list(logs), secrets)):
        size = len(json.dumps(entry, default=str))
        if used + size > cap:
            break
        kept.append(entry)
        used += size
    return list(reversed(kept))


def audit(
    *, tenant: Tenant, actor: Any, tool: Tool, function: str, arguments: Any, result: ToolResult, status: str,
    secrets: list[str], agent: Any = None, conversation: Any = None, via: str = "", title: str = "",
    dry_run: bool = False,
) -> ToolCall:
    """One audit row: arguments redacted, the result excerpt truncated with its full size recorded.

    A result marked `shown` (drawn for the reader) is kept whole: text and data, uncut.
    """
    call = ToolCall(
        tenant=tenant,
        tool=tool,
        tool_name=tool.name,
        function=function[:128],
        actor=actor if getattr(actor, "pk", None) else None,
        agent=agent,
        conversation=conversation,
        via=via,
        client=_CLIENT.get(),
        title=(title or tool.name)[:200],
        dry_run=dry_run,
        arguments=redact(arguments if isinstance(arguments, dict) else {"_": arguments}, secrets),
        status=status,
        input_asked_at=timezone.now() if status == CallStatus.AWAITING_INPUT else None,
        **_outcome(result, secrets),
    )
    try:
        insert(call)  # the warm path's one query
    except Exception as exc:
        # The call ran (OK/ERROR) but the database went away before its row was written: the built row (already
        # redacted) is spooled and replayed later, and the caller gets the result. A call that did not run
        # (denied, awaiting approval) needs its row now (an Approval points at it): the outage stays a 503.
        if status not in (CallStatus.OK, CallStatus.ERROR) or unavailable_service(exc) != "database":
            raise
        audit_spool.spool(call)
        logger.warning("audit row of call %s spooled: database unavailable (%s)", call.call_uid, type(exc).__name__)
        return call
    if not transaction.get_connection().in_atomic_block:
        audit_spool.replay_if_pending()
    return call


# The audit row's INSERT per (database alias, vendor): the SQL, the fields it writes in order, the fields its
# RETURNING gives back, each written field's value preparer; None where the backend cannot return the new id from the
# INSERT (the ORM's save does it).
_Prepare = Callable[[ToolCall, Any], Any]  # (the row, its value of the field) -> the value to write
_Statement = tuple[str, list[Field[Any, Any]], list[Field[Any, Any]], list[_Prepare]]
_INSERTS: dict[tuple[str, str], _Statement | None] = {}
_INTEGER_FIELDS = (models.IntegerField, models.BigIntegerField, models.SmallIntegerField, models.PositiveIntegerField,
                   models.PositiveBigIntegerField, models.PositiveSmallIntegerField)


def _preparer(field: Field[Any, Any], connection: BaseDatabaseWrapper) -> _Prepare:
    """What `field.get_db_prep_save(field.pre_save(row, True))` gives for the row's value, without the field's
    layers of preparation (pre_save, get_db_prep_save, get_db_prep_value, get_prep_value, to_python: ~2 us a field,
    25 fields a row), for the values the gateway's rows hold and fields of exactly Django's own classes: a str of a
    CharField/TextField (a TextChoices member too) and a bool of a BooleanField as they are, an int (or None) of an integer field adapted by the
    backend as the field adapts it, a foreign key's int id (or None) checked as its auto id target checks it, a
    dict/list (or None) of a JSONField by the backend's JSON adaptation with the field's encoder. Any other value, and
    every other field, goes through the field's own chain: the value written is the field's in every case (tested
    against it, tests/tools_app/test_audit_insert.py)."""
    def full(call: ToolCall, value: Any) -> Any:
        return field.get_db_prep_save(field.pre_save(call, True), connection=connection)

    ops: Any = connection.ops  # adapt_integerfield_value/adapt_json_value: on every backend, not in the stubs' base
    kind = type(field)
    if kind in (models.CharField, models.TextField):
        return lambda call, value: value if isinstance(value, str) else full(call, value)  # to_python's own test
    if kind is models.BooleanField:
        return lambda call, value: value if type(value) is bool else full(call, value)
    if kind is models.JSONField:
        encoder = field.encoder  # type: ignore[attr-defined]
        adapt_json = ops.adapt_json_value
        return lambda call, value: (None if value is None else adapt_json(value, encoder)
                                    if type(value) in (dict, list) else full(call, value))
    if kind is models.ForeignKey and type(getattr(field, "target_field", None)) in (models.AutoField,
                                                                                   models.BigAutoField):
        # The target auto id's get_db_prep_value: the id checked (validate_autopk_value), nothing else adapted.
        check_id = ops.validate_autopk_value
        return lambda call, value: (None if value is None else check_id(value) if type(value) is int
                                    else full(call, value))
    if kind in _INTEGER_FIELDS:
        adapt_int, internal = ops.adapt_integerfield_value, field.get_internal_type()
        return lambda call, value: (None if value is None else adapt_int(value, internal) if type(value) is int
                                    else full(call, value))
    return full


def _insert_statement(connection: BaseDatabaseWrapper) -> _Statement | None:
    """The INSERT ... RETURNING that Django's compiler builds for one new ToolCall (the same columns in the same
    order: every local concrete field but the auto pk), built once per alias and vendor."""
    key = (connection.alias, connection.vendor)
    if key not in _INSERTS:
        meta = ToolCall._meta
        fields = [f for f in meta.local_concrete_fields if not f.generated and f is not meta.auto_field]
        returning = list(meta.db_returning_fields)
        ops: Any = connection.ops  # return_insert_columns is on every backend's operations, not in the stubs' base
        returned = ops.return_insert_columns(returning) if connection.features.can_return_columns_from_insert else None
        if not returned or returned[1] or any(f.get_db_converters(connection) for f in returning):
            _INSERTS[key] = None
        else:
            quote = connection.ops.quote_name
            sql = (f"INSERT INTO {quote(meta.db_table)} ({', '.join(quote(str(f.column)) for f in fields)}) "
                   f"VALUES ({', '.join(['%s'] * len(fields))}) {returned[0]}")
            _INSERTS[key] = (sql, fields, returning, [_preparer(f, connection) for f in fields])
    return _INSERTS[key]


def _has_expression(call: ToolCall, fields: list[Field[Any, Any]]) -> bool:
    """Whether a value to write is an expression (F(), Now(), ...), which only the ORM's compiler can write, or is
    not set on the row (deferred: the ORM's save reads it)."""
    values = call.__dict__
    return any(field.attname not in values or hasattr(values[field.attname], "resolve_expression") for field in fields)


def insert(call: ToolCall) -> None:
    """`call.save(force_insert=True)` without compiling the INSERT of 25 columns anew for every row (half of the
    ORM save's CPU): the statement is built once per process, each value is prepared by its own field as the
    ORM's compiler does (`pre_save`, `get_db_prep_save`: JSON adapted, datetimes in UTC, UUIDs for the backend),
    inside the same `mark_for_rollback_on_error`, and the same pre_save/post_save signals are sent (the audit
    stream's outbox, the metrics, a trial run's record). A row that is not new, a value that is an expression, or
    a backend without INSERT ... RETURNING goes through the ORM's save."""
    using = router.db_for_write(ToolCall, instance=call)
    connection = connections[using]
    statement = _insert_statement(connection)
    if statement is None or not call._state.adding or call.pk is not None or _has_expression(call, statement[1]):
        call.save(force_insert=True)
        return
    sql, fields, returning, preparers = statement
    call._prepare_related_fields_for_save(operation_name="save")
    pre_save.send(sender=ToolCall, instance=call, raw=False, using=using, update_fields=None)
    values = call.__dict__
    params = [prepare(call, values[field.attname]) for field, prepare in zip(fields, preparers, strict=True)]
    with transaction.mark_for_rollback_on_error(using=using), connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    for value, field in zip(row, returning, strict=True):
        setattr(call, field.attname, value)
    call._state.db = using
    call._state.adding = False
    post_save.send(sender=ToolCall, instance=call, created=True, update_fields=None, raw=False, using=using)


def _outcome(result: ToolResult, secrets: list[str]) -> dict[str, Any]:
    """The row's fields that say how the call ended: error, cost, the result's excerpt (scrubbed before the cut: a
    cut secret no longer matches), its content parts and the server's log lines, the screen's markers."""
    full = result.text or (json.dumps(result.data, default=str) if result.data is not None else "")
    if result.success and result.shown and result.data is not None:
        full = json.dumps({"text": result.text, "data": result.data}, default=str)
    if not result.success:
        full = result.error or ""
    full = scrub_text(full, secrets)
    cap = len(full) if result.success and result.shown else settings.TOOLHUB_AUDIT_RESULT_CHARS
    return {"result_content": content_excerpt(result.content, cap, secrets),
            "server_logs": logs_excerpt(result.meta.get("logs"), cap, secrets),
            "error_code": result.error_code or "", "error": scrub_text(result.error or "", secrets)[:2000],
            "cost_ms": result.cost_ms, "result_excerpt": full[:cap], "result_size": len(full),
            "result_flags": markers_of(result) if result.success else []}


def settle(call: ToolCall, result: ToolResult, status: str, secrets: list[str]) -> ToolCall:
    """A later round of the same call (a 2026-07-28 server's questions answered by the caller): the call's one row
    takes this round's outcome (`awaiting_input` again when the server asks more), its time the sum of the rounds'.
    Saved whole, so the audit stream and the metrics see the outcome once, when it is final."""
    spent = call.cost_ms or 0
    for name, value in _outcome(result, secrets).items():
        setattr(call, name, value)
    call.cost_ms = spent + (result.cost_ms or 0)
    call.status = status
    call.input_asked_at = timezone.now() if status == CallStatus.AWAITING_INPUT else None
    call.save()
    return call


def resumed(**match: Any) -> ToolCall | None:
    """The row of a call awaiting input that a round answering its questions continues (`match`: its pk and whose
    call it is), or None when there is none (never was, settled, or swept as abandoned). Taking it renews its
    `input_asked_at`, so the sweep (tools_app.services.abandoned_input) never ends a call whose round is running: the
    sweep's row lock and this conditional update order the two, and the loser sees the other's outcome."""
    rows = ToolCall.objects.filter(status=CallStatus.AWAITING_INPUT, **match)
    if not rows.update(input_asked_at=timezone.now()):
        return None
    return rows.first()
