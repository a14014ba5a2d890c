"""Metrics at /metrics (guarded) and JSON log lines carrying the request id."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from django.test import Client

from core.logging import JsonFormatter, RequestIdMiddleware, call_id, request_id
from tenants_app.models import Role
from tests.waiting import PROCESS_BOUND_S
from tools_app.models import Approval, CallStatus, Tool, ToolCall, ToolType

pytestmark = pytest.mark.django_db


def _sample(text: str, name: str, **labels: str) -> float | None:
    """The value of one exposition line `name{labels} value`, or None when absent."""
    for line in text.splitlines():
        if line.startswith("#") or not line.startswith(name + "{"):
            continue
        head, _, value = line.rpartition(" ")
        if all(f'{k}="{v}"' in head for k, v in labels.items()):
            return float(value)
    return None


def test_metrics_count_calls_by_tenant_tool_function_and_status(tenant: Any, member_client: Any) -> None:
    owner = member_client(tenant, Role.OWNER)
    tool = Tool.objects.get(tenant=tenant, type=ToolType.BUILTIN, name="list_directory")
    before = _sample(Client().get("/metrics").content.decode(), "toolhub_tool_calls_total",
                     tenant=str(tenant.pk), tool="list_directory", status="ok") or 0.0

    resp = owner.post(f"/api/v1/tools/{tool.pk}/invoke/", {"function": "list_directory", "arguments": {"path": "."}},
                      format="json")
    assert resp.status_code == 200, resp.content
    assert ToolCall.objects.filter(tenant=tenant, status=CallStatus.OK).count() == 1

    body = Client().get("/metrics").content.decode()
    after = _sample(body, "toolhub_tool_calls_total", tenant=str(tenant.pk), tool="list_directory",
                    function="list_directory", status="ok")
    assert after == before + 1
    assert _sample(body, "toolhub_tool_call_seconds_count", tenant=str(tenant.pk), tool="list_directory") is not None
    assert "toolhub_pool_sessions" in body


def test_metrics_read_pending_approvals_at_scrape_time(tenant: Any, member_client: Any) -> None:
    from datetime import timedelta

    from django.utils import timezone

    owner = member_client(tenant, Role.OWNER)
    call = ToolCall.objects.create(tenant=tenant, tool_name="t", function="f", status=CallStatus.AWAITING_APPROVAL)
    Approval.objects.create(tenant=tenant, tool_call=call, requested_by=owner.user,
                            expires_at=timezone.now() + timedelta(hours=1))
    body = Client().get("/metrics").content.decode()
    assert _sample(body, "toolhub_approvals_pending", tenant=str(tenant.pk)) == 1


def test_metrics_refuse_foreign_addresses_unless_the_token_is_sent(settings: Any) -> None:
    settings.TOOLHUB_METRICS_TOKEN = "scrape-token-123"
    outside = Client(REMOTE_ADDR="203.0.113.9")
    assert outside.get("/metrics").status_code == 404
    assert outside.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 404
    ok = outside.get("/metrics", HTTP_AUTHORIZATION="Bearer scrape-token-123")
    assert ok.status_code == 200 and b"toolhub_tool_calls" in ok.content


def test_every_response_carries_a_request_id_and_keeps_a_well_formed_incoming_one() -> None:
    fresh = Client().get("/api/v1/schema/")
    assert len(fresh["X-Request-ID"]) == 32
    kept = Client().get("/api/v1/schema/", HTTP_X_REQUEST_ID="edge-abc.123")
    assert kept["X-Request-ID"] == "edge-abc.123"
    forged = Client().get("/api/v1/schema/", HTTP_X_REQUEST_ID="bad id\nwith newline")
    assert forged["X-Request-ID"] != "bad id\nwith newline" and len(forged["X-Request-ID"]) == 32


def test_log_lines_are_json_with_request_and_call_ids() -> None:
    seen: list[str] = []

    def view(request: Any) -> Any:
        from django.http import HttpResponse

        token = call_id.set("42")
        try:
            record = logging.LogRecord("toolhub.test", logging.INFO, __file__, 1, "ran %s", ("x",), None)
            record.extra_field = {"k": 1}
            seen.append(JsonFormatter().format(record))
        finally:
            call_id.reset(token)
        return HttpResponse("ok")

    from django.test import RequestFactory

    response = RequestIdMiddleware(view)(RequestFactory().get("/", HTTP_X_REQUEST_ID="req-1"))
    line = json.loads(seen[0])
    assert line["message"] == "ran x" and line["level"] == "INFO" and line["logger"] == "toolhub.test"
    assert line["request_id"] == "req-1" and line["call_id"] == "42"
    assert line["extra_field"] == "{'k': 1}"
    assert response["X-Request-ID"] == "req-1" and request_id.get() == ""


def test_a_bad_metrics_allowlist_fails_at_startup_with_its_name(monkeypatch: Any) -> None:
    import subprocess
    import sys

    env = {"TOOLHUB_METRICS_ALLOW": "not-a-network", "DJANGO_SETTINGS_MODULE": "config.settings.test", "PATH": "/usr/bin"}
    out = subprocess.run([sys.executable, "-c", "import django; django.setup()"], env=env, capture_output=True,
                         text=True, timeout=PROCESS_BOUND_S)
    assert out.returncode != 0 and "TOOLHUB_METRICS_ALLOW" in out.stderr


def test_healthz_answers_without_auth_or_database(django_assert_num_queries: Any) -> None:
    with django_assert_num_queries(0):
        resp = Client().get("/healthz")
    assert resp.status_code == 200 and resp.content == b"ok"


def test_an_outage_of_the_database_or_cache_answers_503_with_the_envelope() -> None:
    from django.db import OperationalError
    from redis.exceptions import ConnectionError as RedisConnectionError

    from core.exceptions import exception_handler

    for exc, service in ((OperationalError("server closed the connection"), "database"),
                         (RedisConnectionError("Connection refused"), "cache")):
        response = exception_handler(exc, {})
        assert response is not None and response.status_code == 503
        assert response.data["error"]["code"] == "service_unavailable"
        assert response.data["error"]["details"]["service"] == service
        assert response["Retry-After"] == "2"
        assert "closed" not in str(response.data) and "refused" not in str(response.data)


def test_an_exhausted_connection_pool_says_so_in_its_503() -> None:
    from django.db import OperationalError
    from psycopg_pool import PoolTimeout

    from core.exceptions import exception_handler

    try:
        try:
            raise PoolTimeout("couldn't get a connection after 20.00 sec")
        except PoolTimeout as cause:
            raise OperationalError(str(cause)) from cause  # what Django's wrap_database_errors raises
    except OperationalError as exc:
        response = exception_handler(exc, {})
    assert response is not None and response.status_code == 503 and response["Retry-After"] == "2"
    error = response.data["error"]
    assert error["code"] == "service_unavailable"
    assert error["details"] == {"service": "database", "retry_after_s": 2, "reason": "pool_exhausted"}
    plain = exception_handler(OperationalError("server closed the connection"), {})
    assert plain is not None and "reason" not in plain.data["error"]["details"]
