"""Quota refusals folded (tools_app.services.quota_refusals): under saturation a refused call costs no database write;
the first refusal of a minute is a full row, the rest one row once the minute is over, every refusal counted once."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from tenants_app.models import Role
from tests.core.test_observability import _sample
from tools_app.models import AuditEvent, CallStatus, Tool, ToolCall, ToolType
from tools_app.services import audit_stream, quota_refusals, quotas

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(not os.environ.get("REDIS_URL"), reason="folding needs Redis (REDIS_URL)"),
]

# Mid-minute of the minute before this one, so the test's calls all fall in one UTC minute whatever the wall clock
# says, and their rows lie in the past (the usage report's default window ends now).
T0 = time.time() // 60 * 60 - 40.0


@pytest.fixture(autouse=True)
def _own_redis_keys(settings: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Counters and fold keys of this test only (a prefix of its own), in the REDIS_URL the environment names."""
    settings.REDIS_URL = os.environ["REDIS_URL"]
    settings.TOOLHUB_QUOTA_PREFIX = f"test-fold-{uuid.uuid4().hex[:8]}:"
    settings.TOOLHUB_QUOTA_FOLD_REFUSALS = True
    monkeypatch.setattr(quotas, "clock", lambda: T0)
    quotas._store.forget()
    quota_refusals._redis.forget()
    yield
    client = redis.Redis.from_url(os.environ["REDIS_URL"])
    for key in client.scan_iter(match=f"{settings.TOOLHUB_QUOTA_PREFIX}*"):
        client.delete(key)
    quotas._store.forget()
    quota_refusals._redis.forget()


@pytest.fixture
def owner(tenant: Any, member_client: Any) -> Any:
    return member_client(tenant, Role.OWNER)


def _invoke(client: Any, tool: Tool) -> Any:
    return client.post(
        f"/api/v1/tools/{tool.pk}/invoke/",
        {"function": "list_directory", "arguments": {"path": "."}},
        format="json",
    )


def _inserts(queries: CaptureQueriesContext) -> list[str]:
    return [q["sql"] for q in queries.captured_queries if q["sql"].lstrip().upper().startswith("INSERT")]


def test_refusals_after_the_first_of_a_minute_cost_no_insert_and_fold_into_one_row(
    tenant: Any, owner: Any, settings: Any
) -> None:
    settings.TOOLHUB_AUDIT_STREAM = "file:/dev/null"  # the outbox is written (one event per stored row)
    tool = Tool.objects.get(tenant=tenant, type=ToolType.BUILTIN, name="list_directory")
    labels = {"tenant": str(tenant.pk), "tool": "list_directory"}
    errors_before = (
        _sample(
            Client().get("/metrics").content.decode(),
            "toolhub_tool_call_errors_total",
            code="QUOTA_EXCEEDED",
            **labels,
        )
        or 0.0
    )
    assert (
        owner.post("/api/v1/quotas/", {"scope": "tenant", "per_minute": 1}, format="json").status_code == 201
    )
    assert _invoke(owner, tool).status_code == 200
    first = _invoke(owner, tool)
    assert first.status_code == 429 and first.json()["call_id"] is not None
    events = AuditEvent.objects.count()
    with CaptureQueriesContext(connection) as queries:
        folded = [_invoke(owner, tool) for _ in range(4)]
    assert [r.status_code for r in folded] == [429] * 4
    assert all(
        r.json()["error_code"] == "QUOTA_EXCEEDED" and r.json()["audit"] == {"folded": True} for r in folded
    )
    assert _inserts(queries) == [], _inserts(queries)
    denied = ToolCall.objects.filter(tenant=tenant, status=CallStatus.DENIED)
    assert [(r.error_code, r.call_count, r.pk) for r in denied] == [
        ("QUOTA_EXCEEDED", 1, first.json()["call_id"])
    ]
    assert AuditEvent.objects.count() == events
    # Metrics count every refusal as it is answered.
    scrape = Client().get("/metrics").content.decode()
    assert (
        _sample(scrape, "toolhub_tool_call_errors_total", code="QUOTA_EXCEEDED", **labels)
        == errors_before + 5
    )

    assert quota_refusals.fold(now=T0 + 30) == {"rows": 0, "refusals": 0}  # the minute is not over
    assert quota_refusals.fold(now=T0 + 150) == {"rows": 1, "refusals": 4}
    row = denied.exclude(pk=first.json()["call_id"]).get()
    assert row.call_count == 4 and row.error_code == "QUOTA_EXCEEDED" and row.arguments == {}
    assert row.function == "list_directory" and row.actor_id == owner.user.pk and row.via == "invoke"
    assert f"call #{first.json()['call_id']}" in row.error and "per minute" in row.error
    assert quota_refusals.fold(now=T0 + 150) == {"rows": 0, "refusals": 0}  # nothing twice
    event = AuditEvent.objects.get(tool_call=row)
    assert audit_stream.record(event.id, row)["count"] == 4
    usage = owner.get("/api/v1/usage/").json()["tools"][0]
    assert usage["quota_refusals"] == 5 and usage["calls"] == 6 and usage["errors"] == {"QUOTA_EXCEEDED": 5}


def test_a_fold_that_stopped_after_its_insert_writes_nothing_the_second_time(tenant: Any, owner: Any) -> None:
    tool = Tool.objects.get(tenant=tenant, type=ToolType.BUILTIN, name="list_directory")
    owner.post("/api/v1/quotas/", {"scope": "tenant", "per_minute": 1}, format="json")
    codes = [_invoke(owner, tool).status_code for _ in range(4)]
    assert codes == [200, 429, 429, 429]
    assert quota_refusals.fold(now=T0 + 150) == {"rows": 1, "refusals": 2}
    # As if the fold had stopped between its INSERT and marking the refusals recorded.
    client = redis.Redis.from_url(os.environ["REDIS_URL"])
    keys = [k for k in client.scan_iter(match=f"{quota_refusals._prefix()}r:*")]
    assert len(keys) == 1
    client.hincrby(keys[0], "done", -2)
    assert quota_refusals.fold(now=T0 + 150) == {"rows": 0, "refusals": 0}
    rows = ToolCall.objects.filter(tenant=tenant, status=CallStatus.DENIED)
    assert sorted(r.call_count for r in rows) == [1, 2]
    # A refusal arriving late in the folded minute (a process whose clock lags) is folded by the next fold.
    assert _invoke(owner, tool).status_code == 429
    assert quota_refusals.fold(now=T0 + 150) == {"rows": 1, "refusals": 1}
    assert sum(r.call_count for r in rows.all()) == 4


def test_each_member_and_function_has_its_own_first_row(tenant: Any, owner: Any, member_client: Any) -> None:
    tool = Tool.objects.get(tenant=tenant, type=ToolType.BUILTIN, name="list_directory")
    other = member_client(tenant, Role.MEMBER)
    owner.post("/api/v1/quotas/", {"scope": "tenant", "per_minute": 1}, format="json")
    assert [_invoke(c, tool).status_code for c in (owner, owner, other, other, owner)] == [
        200,
        429,
        429,
        429,
        429,
    ]
    first_rows = ToolCall.objects.filter(tenant=tenant, status=CallStatus.DENIED)
    assert sorted(r.actor_id or 0 for r in first_rows) == sorted([owner.user.pk, other.user.pk])
    assert quota_refusals.fold(now=T0 + 150) == {"rows": 2, "refusals": 2}


def test_without_folding_every_refusal_is_its_own_row(tenant: Any, owner: Any, settings: Any) -> None:
    settings.TOOLHUB_QUOTA_FOLD_REFUSALS = False
    tool = Tool.objects.get(tenant=tenant, type=ToolType.BUILTIN, name="list_directory")
    owner.post("/api/v1/quotas/", {"scope": "tenant", "per_minute": 1}, format="json")
    assert [_invoke(owner, tool).status_code for _ in range(3)] == [200, 429, 429]
    assert ToolCall.objects.filter(tenant=tenant, status=CallStatus.DENIED).count() == 2


@pytest.mark.parametrize("fold_refusals", [True, False])
def test_folded_refusals_reach_the_usage_report_and_page_through_the_beat_task(
    tenant: Any, owner: Any, settings: Any, monkeypatch: pytest.MonkeyPatch, fold_refusals: bool
) -> None:
    """End to end: refusals counted in Redis, written by the beat task (tools.fold_quota_refusals, as beat runs it:
    minutes that ended at least a minute ago), are counted once each in GET /api/v1/usage/ (`quota_refusals`, `calls`,
    `errors`) and on the usage page; with TOOLHUB_QUOTA_FOLD_REFUSALS off every refusal is its own row, same counts."""
    from tools_app.tasks import fold_quota_refusals

    settings.TOOLHUB_QUOTA_FOLD_REFUSALS = fold_refusals
    then = time.time() // 60 * 60 - 170.0  # mid-minute, three minutes ago: a minute the beat task folds now
    monkeypatch.setattr(quotas, "clock", lambda: then)
    tool = Tool.objects.get(tenant=tenant, type=ToolType.BUILTIN, name="list_directory")
    assert owner.post("/api/v1/quotas/", {"scope": "tool", "target": str(tool.pk), "per_minute": 2},
                      format="json").status_code == 201
    answers = [_invoke(owner, tool).status_code for _ in range(9)]
    assert answers == [200, 200] + [429] * 7
    rows = ToolCall.objects.filter(tenant=tenant, error_code="QUOTA_EXCEEDED")
    assert rows.count() == (1 if fold_refusals else 7)  # folded: the first of the minute only, for now
    assert fold_quota_refusals.apply().get() == ({"rows": 1, "refusals": 6} if fold_refusals else
                                                 {"rows": 0, "refusals": 0})
    assert fold_quota_refusals.apply().get() == {"rows": 0, "refusals": 0}  # nothing twice
    assert sorted(rows.values_list("call_count", flat=True)) == ([1, 6] if fold_refusals else [1] * 7)

    listed = owner.get("/api/v1/usage/").json()["tools"]
    assert [(t["tool"], t["calls"], t["quota_refusals"], t["errors"]) for t in listed] == [
        (tool.pk, 9, 7, {"QUOTA_EXCEEDED": 7})]
    # `since`/`until` select by a row's time: the folded row is stamped with its last refusal (the quota clock, three
    # minutes ago here), the other rows with the audit's own clock (now).
    since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(then - 30))
    until = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(then + 30))
    windowed = owner.get("/api/v1/usage/", {"since": since, "until": until}).json()["tools"]
    assert [(t["calls"], t["quota_refusals"]) for t in windowed] == ([(6, 6)] if fold_refusals else [])

    owner.user.is_staff = True
    owner.user.save(update_fields=["is_staff"])
    page = Client()
    page.force_login(owner.user)
    html = page.get("/admin/tools_app/quota/usage/")
    assert html.status_code == 200
    text = html.content.decode()
    assert '<td class="num" id="total-refusals">7</td>' in text, text[:3000]
    assert '<td class="num" id="total-calls">9</td>' in text
    assert '<td class="num" id="total-errors">7</td>' in text
