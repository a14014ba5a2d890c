"""The audit row's INSERT (tools_app.services.audit.insert) writes what the ORM's save writes and sends the same
signals, so the audit stream's outbox and the metrics see every row."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.db import IntegrityError, transaction
from django.db.models.signals import post_save, pre_save
from django.utils import timezone

from tests.factories import UserFactory
from tools_app.models import CallStatus, ToolCall
from tools_app.runtime.result import ToolResult
from tools_app.services import audit as audit_service

pytestmark = pytest.mark.django_db


def _row(tenant: Any, tool: Any, actor: Any = None, **extra: Any) -> ToolCall:
    return ToolCall(tenant=tenant, tool=tool, tool_name=tool.name, function="get_inventory", actor=actor,
                    via="invoke", client="a-client", title="Inventory", arguments={"sku": "DEMO-001", "n": [1, 2]},
                    error_code="", cost_ms=12, result_excerpt='{"stock": 42}', result_size=13,
                    result_content=[{"type": "text", "text": "42"}], server_logs=[{"level": "info", "data": "x"}],
                    result_flags=["hidden_text"], **{"status": CallStatus.OK, **extra})


def _stored(pk: int) -> dict[str, Any]:
    """Every column of the stored row, as the database gives it back (not the instance's own values)."""
    row = ToolCall.objects.filter(pk=pk).values(*[f.attname for f in ToolCall._meta.concrete_fields]).get()
    return {name: value for name, value in row.items() if name not in ("id", "call_uid")}


def _pair(tenant: Any, tool: Any, **extra: Any) -> tuple[ToolCall, ToolCall]:
    fast, orm = _row(tenant, tool, **extra), _row(tenant, tool, **extra)
    audit_service.insert(fast)
    orm.save(force_insert=True)
    return fast, orm


def test_the_row_it_writes_is_the_one_save_writes(tenant: Any, tool_factory: Any) -> None:
    tool = tool_factory(tenant=tenant, name="inventory")
    asked = datetime(2026, 12, 7, 6, 30, 1, 123456, tzinfo=ZoneInfo("Europe/Paris"))
    fast, orm = _pair(tenant, tool, actor=UserFactory(), created_at=timezone.now(), input_asked_at=asked,
                      status=CallStatus.AWAITING_INPUT, dry_run=True, call_count=3)
    assert fast.pk is not None and orm.pk is not None and fast.pk != orm.pk
    assert not fast._state.adding and fast._state.db == "default"
    stored = _stored(fast.pk)
    assert stored == _stored(orm.pk)
    # Each kind of field read back as written: JSON structures, an aware datetime (another zone) at the same
    # instant, the UUID, the foreign keys, booleans and counts.
    assert stored["arguments"] == {"sku": "DEMO-001", "n": [1, 2]} and stored["result_flags"] == ["hidden_text"]
    assert stored["result_content"] == [{"type": "text", "text": "42"}]
    assert stored["input_asked_at"] == asked and stored["created_at"] == fast.created_at
    assert stored["actor_id"] == fast.actor_id and stored["tool_id"] == tool.pk and stored["tenant_id"] == tenant.pk
    assert stored["dry_run"] is True and stored["call_count"] == 3 and stored["status"] == CallStatus.AWAITING_INPUT
    uid = ToolCall.objects.values_list("call_uid", flat=True).get(pk=fast.pk)
    assert uid == fast.call_uid and isinstance(uid, uuid.UUID)


def test_nulls_and_defaults_are_written_as_save_writes_them(tenant: Any, tool_factory: Any) -> None:
    tool = tool_factory(tenant=tenant, name="inventory")
    moment = timezone.now()
    fast, orm = (ToolCall(tenant=tenant, tool=None, tool_name=tool.name, function="f", status=CallStatus.ERROR,
                          created_at=moment) for _ in range(2))
    audit_service.insert(fast)
    orm.save(force_insert=True)
    stored = _stored(fast.pk)
    assert stored == _stored(orm.pk)
    assert stored["result_content"] is None and stored["server_logs"] is None and stored["result_flags"] == []
    assert stored["arguments"] == {} and stored["actor_id"] is None and stored["input_asked_at"] is None


def test_a_failed_insert_spoils_the_transaction_around_it_as_save_does(tenant: Any, tool_factory: Any) -> None:
    tool = tool_factory(tenant=tenant, name="inventory")
    first = _row(tenant, tool, actor=None)
    audit_service.insert(first)
    again = _row(tenant, tool, actor=None, call_uid=first.call_uid)
    with transaction.atomic():
        with pytest.raises(IntegrityError):
            audit_service.insert(again)
        # Marked for rollback as the ORM's save marks it, so leaving the block rolls back to its savepoint.
        assert transaction.get_connection().needs_rollback
    assert again._state.adding and again.pk is None
    assert ToolCall.objects.filter(call_uid=first.call_uid).count() == 1  # the outer transaction goes on


def test_it_sends_pre_and_post_save_as_save_does(tenant: Any, tool_factory: Any) -> None:
    tool = tool_factory(tenant=tenant, name="inventory")
    seen: list[tuple[str, Any, Any]] = []

    def before(sender: Any, instance: ToolCall, **kwargs: Any) -> None:
        seen.append(("pre", instance.pk, kwargs.get("raw")))

    def after(sender: Any, instance: ToolCall, **kwargs: Any) -> None:
        seen.append(("post", instance.pk, kwargs.get("created")))

    pre_save.connect(before, sender=ToolCall, weak=False)
    post_save.connect(after, sender=ToolCall, weak=False)
    try:
        call = _row(tenant, tool, None)
        audit_service.insert(call)
    finally:
        pre_save.disconnect(before, sender=ToolCall)
        post_save.disconnect(after, sender=ToolCall)
    assert seen == [("pre", None, False), ("post", call.pk, True)]


def test_an_expression_value_goes_through_the_orm(tenant: Any, tool_factory: Any) -> None:
    from django.db.models.functions import Now

    tool = tool_factory(tenant=tenant, name="inventory")
    call = _row(tenant, tool, None)
    call.input_asked_at = Now()
    audit_service.insert(call)
    assert ToolCall.objects.get(pk=call.pk).input_asked_at is not None


def test_audit_writes_its_row_through_it(tenant: Any, tool_factory: Any, monkeypatch: Any) -> None:
    tool = tool_factory(tenant=tenant, name="inventory")
    inserted: list[ToolCall] = []
    original = audit_service.insert

    def counted(call: ToolCall) -> None:
        inserted.append(call)
        original(call)

    monkeypatch.setattr(audit_service, "insert", counted)
    call = audit_service.audit(tenant=tenant, actor=None, tool=tool, function="get_inventory",
                               arguments={"sku": "DEMO-001"}, result=ToolResult.ok(text="42"), status=CallStatus.OK,
                               secrets=[])
    assert inserted == [call]
    stored = ToolCall.objects.get(pk=call.pk)
    assert stored.result_excerpt == "42" and stored.arguments == {"sku": "DEMO-001"}
    assert stored.created_at <= timezone.now()


def test_it_does_not_go_through_the_orms_save(tenant: Any, tool_factory: Any, monkeypatch: Any) -> None:
    tool = tool_factory(tenant=tenant, name="inventory")

    def refused(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the ORM's save was used")

    monkeypatch.setattr(ToolCall, "save", refused)
    monkeypatch.setattr(ToolCall, "save_base", refused)
    call = _row(tenant, tool, None)
    audit_service.insert(call)
    assert ToolCall.objects.filter(pk=call.pk).exists()


def test_the_audit_streams_outbox_and_the_metrics_see_its_row(tenant: Any, tool_factory: Any, settings: Any) -> None:
    from core import metrics
    from tools_app.models import AuditEvent

    settings.TOOLHUB_AUDIT_STREAM = "file:/dev/null"
    tool = tool_factory(tenant=tenant, name="inventory")
    counter = metrics.TOOL_CALLS.labels(str(tenant.pk), tool.name, "get_inventory", CallStatus.OK)
    before = counter._value.get()
    call = _row(tenant, tool)
    audit_service.insert(call)
    assert list(AuditEvent.objects.values_list("tool_call_id", flat=True)) == [call.pk]
    assert counter._value.get() == before + 1  # counted by tools_app.metrics' post_save receiver


def _same(written: Any, expected: Any) -> bool:
    """The same value of the same type (a backend's wrapper, e.g. psycopg's Jsonb, compared by what it wraps)."""
    if type(written) is not type(expected):
        return False
    if hasattr(expected, "obj"):
        return bool(written.obj == expected.obj)
    return bool(written == expected)


def test_each_fields_value_is_prepared_as_the_field_prepares_it(tenant: Any, tool_factory: Any) -> None:
    """The statement's preparers skip the fields' layers for the usual values; for every field of the row and values
    of every kind (the usual ones, and ones only the field's own chain handles: a bool or str where an int goes, a
    lazy string, a tuple, a datetime, a UUID), what they give is exactly what the field's get_db_prep_save gives,
    or the same error."""
    from django.db import connection
    from django.utils.functional import lazy

    tool = tool_factory(tenant=tenant, name="inventory")
    statement = audit_service._insert_statement(connection)
    assert statement is not None
    _sql, fields, _returning, preparers = statement
    lazy_text = lazy(lambda: "lazy", str)()
    values: list[Any] = ["", "x", "é ✓", CallStatus.OK, True, False, 0, 7, 2**40, None, {}, {"a": [1, None]}, [], [1, "x"],
                         ("t",), lazy_text, 1.5, timezone.now(), uuid.uuid4()]
    call = _row(tenant, tool)
    compared = 0
    for field, prepare in zip(fields, preparers, strict=True):
        for value in values:
            setattr(call, field.attname, value)
            try:
                expected = field.get_db_prep_save(field.pre_save(call, True), connection=connection)
            except Exception as exc:  # noqa: BLE001 - the preparer must fail alike
                with pytest.raises(type(exc)):
                    prepare(call, value)
                continue
            written = prepare(call, value)
            assert _same(written, expected), (field.name, value, written, expected)
            compared += 1
    assert compared > len(fields) * 5


def test_the_usual_values_skip_the_fields_chain(tenant: Any, tool_factory: Any, monkeypatch: Any) -> None:
    """The gateway's row (str, bool, int ids and counts, JSON structures) is prepared without the fields' chain; the
    datetimes and the UUID go through it."""
    from django.db import connection
    from django.db.models.fields import Field
    from django.db.models.fields.json import JSONField
    from django.db.models.fields.related import ForeignKey

    tool = tool_factory(tenant=tenant, name="inventory")
    actor = UserFactory()
    statement = audit_service._insert_statement(connection)
    assert statement is not None
    chained: list[str] = []
    for cls in (Field, JSONField, ForeignKey):
        original = cls.get_db_prep_save

        def counted(self: Any, value: Any, connection: Any, _original: Any = original) -> Any:
            chained.append(self.name)
            return _original(self, value, connection)

        monkeypatch.setattr(cls, "get_db_prep_save", counted)
    call = _row(tenant, tool, actor=actor)
    audit_service.insert(call)
    assert sorted(set(chained)) == ["call_uid", "created_at", "input_asked_at"]
    assert ToolCall.objects.filter(pk=call.pk).exists()
