"""GET /api/v1/usage/: per tool calls, errors by code, latency percentiles and quota refusals; /metrics by outcome."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.test import Client

from tenants_app.models import Role
from tests.core.test_observability import _sample
from tests.factories import TenantFactory
from tools_app.models import CallStatus, Tool, ToolCall, ToolType
from tools_app.services import quota_refusals, quotas

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_counters() -> Iterator[None]:
    quotas._store.forget()
    yield
    quotas._store.forget()


@pytest.fixture
def owner(tenant: Any, member_client: Any) -> Any:
    return member_client(tenant, Role.OWNER)


def audit_row(tenant: Any, tool: Tool, *, status: str = CallStatus.OK, code: str = "", cost_ms: int = 10,
              at: datetime | None = None, actor: Any = None) -> ToolCall:
    row = ToolCall.objects.create(tenant=tenant, tool=tool, tool_name=tool.name, function=tool.name, status=status,
                                  error_code=code, cost_ms=cost_ms, actor=actor)
    if at is not None:
        ToolCall.objects.filter(pk=row.pk).update(created_at=at)
    return row


def test_usage_per_tool_with_errors_percentiles_and_refusals(tenant: Any, owner: Any) -> None:
    lister = Tool.objects.get(tenant=tenant, name="list_directory")
    reader = Tool.objects.get(tenant=tenant, name="read_file")
    for ms in range(1, 101):  # 1..100 ms
        audit_row(tenant, lister, cost_ms=ms)
    audit_row(tenant, lister, status=CallStatus.ERROR, code="TIMEOUT", cost_ms=5000)
    audit_row(tenant, lister, status=CallStatus.DENIED, code="QUOTA_EXCEEDED", cost_ms=0)
    audit_row(tenant, lister, status=CallStatus.DENIED, code="QUOTA_EXCEEDED", cost_ms=0)
    audit_row(tenant, reader, status=CallStatus.ERROR, code="BUSINESS_ERROR", cost_ms=7)
    audit_row(tenant, reader, status=CallStatus.AWAITING_APPROVAL)  # no outcome yet: not counted
    audit_row(tenant, reader, at=datetime.now(UTC) - timedelta(days=3))  # outside the default window
    other = TenantFactory(slug="other")
    audit_row(other, Tool.objects.get(tenant=other, name="list_directory"))  # never counted here

    resp = owner.get("/api/v1/usage/")
    assert resp.status_code == 200, resp.content
    tools = {row["name"]: row for row in resp.json()["tools"]}
    assert set(tools) == {"list_directory", "read_file"}
    listed = tools["list_directory"]
    assert listed["tool"] == lister.pk and listed["calls"] == 103
    assert listed["errors"] == {"TIMEOUT": 1, "QUOTA_EXCEEDED": 2}
    assert listed["quota_refusals"] == 2
    assert listed["p50_ms"] == 51 and listed["p95_ms"] == 96  # 101 run calls: 1..100 ms and one of 5 s
    assert tools["read_file"] == {"tool": reader.pk, "name": "read_file", "calls": 1, "errors": {"BUSINESS_ERROR": 1},
                                  "p50_ms": 7, "p95_ms": 7, "quota_refusals": 0}


def test_usage_window_is_since_until_in_iso(tenant: Any, owner: Any) -> None:
    reader = Tool.objects.get(tenant=tenant, name="read_file")
    audit_row(tenant, reader, at=datetime(2026, 1, 1, 10, 0, tzinfo=UTC))
    audit_row(tenant, reader, at=datetime(2026, 1, 2, 10, 0, tzinfo=UTC))
    body = owner.get("/api/v1/usage/", {"since": "2026-01-01T00:00:00Z", "until": "2026-01-02T00:00:00+00:00"}).json()
    assert [(t["name"], t["calls"]) for t in body["tools"]] == [("read_file", 1)]
    naive = owner.get("/api/v1/usage/", {"since": "2026-01-01T00:00:00", "until": "2026-01-03T00:00:00"}).json()
    assert naive["tools"][0]["calls"] == 2


@pytest.mark.parametrize(("params", "field"), [
    ({"since": "yesterday"}, "since"),
    ({"until": "2026-13-01T00:00:00Z"}, "until"),
    ({"since": "2026-01-02T00:00:00Z", "until": "2026-01-01T00:00:00Z"}, "since"),
])
def test_bad_times_are_a_typed_error(owner: Any, params: dict[str, str], field: str) -> None:
    resp = owner.get("/api/v1/usage/", params)
    assert resp.status_code == 400
    error = resp.json()["error"]
    assert error["code"] == "invalid_time" and error["details"]["field"] == field


def test_members_may_not_read_usage(tenant: Any, member_client: Any) -> None:
    assert member_client(tenant, Role.MEMBER).get("/api/v1/usage/").status_code == 403


def test_metrics_count_errors_by_code_and_quota_refusals_by_scope(tenant: Any, owner: Any) -> None:
    tool = Tool.objects.get(tenant=tenant, type=ToolType.BUILTIN, name="list_directory")
    labels = {"tenant": str(tenant.pk), "tool": "list_directory"}
    scrape = Client().get("/metrics").content.decode()
    errors_before = _sample(scrape, "toolhub_tool_call_errors_total", code="QUOTA_EXCEEDED", **labels) or 0.0
    refusals_before = _sample(scrape, "toolhub_quota_refusals_total", scope="tenant", **labels) or 0.0
    owner.post("/api/v1/quotas/", {"scope": "tenant", "per_minute": 1}, format="json")
    codes = [owner.post(f"/api/v1/tools/{tool.pk}/invoke/", {"function": "list_directory", "arguments": {"path": "."}},
                        format="json").status_code for _ in range(3)]
    assert codes == [200, 429, 429]
    scrape = Client().get("/metrics").content.decode()
    assert _sample(scrape, "toolhub_tool_call_errors_total", code="QUOTA_EXCEEDED", **labels) == errors_before + 2
    assert _sample(scrape, "toolhub_quota_refusals_total", scope="tenant", **labels) == refusals_before + 2
    quota_refusals.fold(now=time.time() + 150)  # with Redis, the second refusal is folded: its minute's row now
    body = owner.get("/api/v1/usage/").json()
    assert body["tools"][0]["quota_refusals"] == 2 and body["tools"][0]["calls"] == 3
