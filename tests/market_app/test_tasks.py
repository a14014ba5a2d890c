"""Celery tasks: the thin refresh task and the beat dispatcher of due sources."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any
from unittest import mock

import pytest
from django.conf import settings
from django.utils import timezone

from market_app import tasks
from market_app.models import MarketEntry, MarketSource
from tests.fixtures.catalog_server import CatalogServer
from tests.waiting import scaled


@pytest.fixture
def catalog() -> Iterator[CatalogServer]:
    with CatalogServer() as srv:
        srv.json("/catalog.json", [{"name": "alpha", "url": "https://a.example.test/mcp"},
                                   {"name": "beta", "command": "uvx", "args": ["beta"]}])
        yield srv


@pytest.mark.celery_worker
@pytest.mark.django_db(transaction=True)
def test_refresh_source_task_round_trip(catalog: CatalogServer) -> None:
    """Eager without a broker; in CI a real worker process reads the committed source row."""
    source = MarketSource.objects.create(name="Task cat", url=catalog.url("/catalog.json"), format="list")
    result = tasks.refresh_source.delay(source.pk).get(timeout=scaled(30))
    assert result["ok"] is True and result["added"] == 2
    source.refresh_from_db()
    assert source.last_status == "ok" and source.refreshing_until is None
    assert MarketEntry.objects.filter(source=source).count() == 2
    if settings.TOOLHUB_TEST_CELERY_WORKER:
        assert not settings.CELERY_TASK_ALWAYS_EAGER


@pytest.mark.django_db
def test_refresh_task_records_and_returns_a_failure(catalog: CatalogServer) -> None:
    catalog.raw("/catalog.json", "<html>maintenance</html>")
    source = MarketSource.objects.create(name="Cat", url=catalog.url("/catalog.json"), format="list")
    result = tasks.refresh_source(source.pk)
    assert result["ok"] is False and result["error"]["code"] == "not_json"
    source.refresh_from_db()
    assert source.last_status == "error" and "expected a JSON catalog" in source.last_error


@pytest.mark.django_db
def test_refresh_task_is_a_no_op_while_another_refresh_runs(catalog: CatalogServer) -> None:
    source = MarketSource.objects.create(name="Cat", url=catalog.url("/catalog.json"),
                                         refreshing_until=timezone.now() + timedelta(minutes=5))
    result = tasks.refresh_source(source.pk)
    assert result["error"]["code"] == "refresh_in_progress"
    assert not catalog.seen("/catalog.json")


@pytest.mark.django_db
def test_refresh_task_of_a_deleted_source() -> None:
    assert tasks.refresh_source(999999)["error"]["code"] == "not_found"


@pytest.mark.django_db
def test_dispatch_enqueues_only_due_enabled_sources(tenant: Any) -> None:
    now = timezone.now()
    never = MarketSource.objects.create(name="never", url="http://127.0.0.1:9/a")
    due = MarketSource.objects.create(name="due", url="http://127.0.0.1:9/b", refresh_interval_min=60,
                                      last_refresh_at=now - timedelta(minutes=61))
    MarketSource.objects.create(name="fresh", url="http://127.0.0.1:9/c", tenant=tenant, refresh_interval_min=60,
                                last_refresh_at=now - timedelta(minutes=59))
    MarketSource.objects.create(name="off", url="http://127.0.0.1:9/d", enabled=False)
    MarketSource.objects.create(name="busy", url="http://127.0.0.1:9/e",
                                refreshing_until=now + timedelta(minutes=1))
    with mock.patch.object(tasks.refresh_source, "delay") as delay:
        enqueued = tasks.dispatch_due_refreshes()
    assert enqueued == [never.pk, due.pk]
    assert [c.args for c in delay.call_args_list] == [(never.pk,), (due.pk,)]


def test_beat_schedule_runs_the_dispatcher_every_minute() -> None:
    entry = settings.CELERY_BEAT_SCHEDULE["market-refresh-due"]
    assert entry["task"] == "market.dispatch_due_refreshes" and entry["schedule"] == 60.0
