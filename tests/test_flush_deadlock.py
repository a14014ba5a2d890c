"""The suite's own database emptying (tests/conftest.py `_flush_retries_deadlocks`): on PostgreSQL a transactional
test's TRUNCATE that loses a deadlock to a reader the test left running is tried again, so the next test starts
from an empty database (CI's pass 2 once failed two tests this way: the flush was cancelled, the next test met the
last one's tool)."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest
from django.core.management.color import no_style
from django.core.management.sql import sql_flush
from django.db import connection

from tenants_app.models import Tenant

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif("postgresql" not in connection.vendor, reason="PostgreSQL's TRUNCATE and deadlock detector"),
]


def test_a_reader_holding_one_table_and_wanting_another_during_the_flush(tenant: object) -> None:
    """The reader locks the flush's last table, then (once the flush waits for it) asks for its first: a cycle, and
    PostgreSQL cancels the flush, which waited first. Without the retry this test's teardown errors."""
    sql = sql_flush(no_style(), connection, reset_sequences=True, allow_cascade=False)[0]
    tables = [t.strip().strip('"') for t in
              sql[len("TRUNCATE "):].rstrip(";").replace(" RESTART IDENTITY", "").split(",")]
    settings = connection.settings_dict
    dsn = f"host={settings['HOST']} port={settings['PORT'] or 5432} user={settings['USER']} dbname={settings['NAME']}"

    def reader() -> None:
        with psycopg.connect(dsn) as other:
            other.execute(f'SELECT 1 FROM "{tables[-1]}" LIMIT 1')
            time.sleep(0.6)  # the flush (after this test returns) is waiting for the last table by now
            other.execute(f'SELECT 1 FROM "{tables[0]}" LIMIT 1')

    threading.Thread(target=reader, daemon=True).start()
    time.sleep(0.3)


def test_the_next_test_starts_from_an_empty_database() -> None:
    assert not Tenant.objects.exists()
