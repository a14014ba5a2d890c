"""The audit row's INSERT (tools_app.services.audit.insert) writes what the ORM's save writes and sends the same
signals, so the audit stream's outbox and the metrics see every row."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.db.models.signals import post_save, pre_save
from django.forms.models import model_to_dict
from django.utils import timezone

from tests.factories import UserFactory
from tools_app.models import CallStatus, ToolCall
from tools_app.runtime.result import ToolResult
from tools_app.services import audit as audit_service

pytestmark = pytest.mark.django_db


def _row(tenant: Any, tool: Any, actor: Any, **extra: Any) -> ToolCall:
    return ToolCall(tenant=tenant, tool=tool, tool_name=tool.name, function="get_inventory", actor=actor,
                    via="invoke", client="a-client", title="Inventory", arguments={"sku": "DEMO-001", "n": [1, 2]},
                    status=CallStatus.OK, error_code="", cost_ms=12, result_excerpt='{"stock": 42}', result_size=13,
                    result_content=[{"type": "text", "text": "42"}], server_logs=[{"level": "info", "data": "x"}],
                    result_flags=["hidden_text"], **extra)


def _stored(pk: int) -> dict[str, Any]:
    found = model_to_dict(ToolCall.objects.get(pk=pk), exclude=["id", "call_uid", "created_at"])
    return dict(found)


def test_the_row_it_writes_is_the_one_save_writes(tenant: Any, tool_factory: Any) -> None:
    tool = tool_factory(tenant=tenant, name="inventory")
    actor = UserFactory()
    fast, orm = _row(tenant, tool, actor), _row(tenant, tool, actor)
    audit_service.insert(fast)
    orm.save(force_insert=True)
    assert fast.pk is not None and fast.pk != orm.pk
    assert not fast._state.adding and fast._state.db == "default"
    assert _stored(fast.pk) == _stored(orm.pk)
    stored = ToolCall.objects.get(pk=fast.pk)
    assert stored.call_uid == fast.call_uid and isinstance(stored.call_uid, uuid.UUID)
    assert stored.created_at == fast.created_at


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
