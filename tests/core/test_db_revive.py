"""A pooled PostgreSQL connection the server cut while it sat in the pool (a restart) is replaced before its first
query: the request that takes it out of the pool gets a live one instead of a `service_unavailable`.

Against a real PostgreSQL at 127.0.0.1:5432 (database `test`, as in CI's second pass); skipped without one. The
cut is made as a restart makes it: the server ends the backend (pg_terminate_backend sends the same FATAL 57P01
"terminating connection due to administrator command" as a fast shutdown) while the connection is idle in the pool.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.db.utils import ConnectionHandler

PG_URL = "postgresql://postgres@127.0.0.1:5432/test"


@pytest.fixture
def admin() -> Iterator[Any]:
    psycopg = pytest.importorskip("psycopg")
    pytest.importorskip("psycopg_pool")
    try:
        conn = psycopg.connect(PG_URL, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError:
        pytest.skip("PostgreSQL at 127.0.0.1:5432 is unreachable")
    yield conn
    conn.close()


@pytest.fixture
def pooled(django_db_blocker: Any) -> Iterator[Any]:
    """A Django connection to the same server through production's pool (psycopg_pool, two connections)."""
    django_db_blocker.unblock()
    handler = ConnectionHandler({
        "default": {"ENGINE": "django.db.backends.dummy"},
        "revive": {
            "ENGINE": "django.db.backends.postgresql", "NAME": "test", "USER": "postgres", "HOST": "127.0.0.1",
            "PORT": "5432", "CONN_MAX_AGE": 0,
            "OPTIONS": {"pool": {"min_size": 2, "max_size": 2, "timeout": 10}},
        }
    })
    conn: Any = handler["revive"]
    yield conn
    conn.close()
    conn.close_pool()
    django_db_blocker.restore()


def _pid(conn: Any) -> int:
    with conn.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return int(cursor.fetchone()[0])


def _idle_backends(admin: Any) -> set[int]:
    """The backends of database `test` idle now (the pool's, given back), the admin's own left out."""
    return {row[0] for row in admin.execute(
        "SELECT pid FROM pg_stat_activity WHERE datname = 'test' AND usename = 'postgres' AND pid <> pg_backend_pid()"
        " AND state = 'idle'").fetchall()}


def _terminate(admin: Any, pids: set[int]) -> None:
    for pid in pids:
        assert admin.execute("SELECT pg_terminate_backend(%s)", [pid]).fetchone()[0] is True
    deadline = time.monotonic() + 5
    while admin.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)", [list(pids)]).fetchone()[0]:
        assert time.monotonic() < deadline, "the server did not end the backends"
        time.sleep(0.02)


def test_the_first_query_after_the_cut_runs_on_a_new_connection(admin: Any, pooled: Any) -> None:
    # Take both of the pool's connections out and give them back, so both are idle in the pool.
    first = _pid(pooled)
    pooled.close()
    pooled.pool.wait(timeout=5)
    idle = _idle_backends(admin)
    assert first in idle
    _terminate(admin, idle)

    # Every connection the pool holds is now cut; the next request's first query still succeeds.
    after = _pid(pooled)
    assert after not in idle
    pooled.close()
    # And so does the one after it (the other cut connection was found and replaced too, or a new one given).
    assert _pid(pooled) not in idle


def test_a_live_pooled_connection_is_kept(admin: Any, pooled: Any) -> None:
    first = _pid(pooled)
    pooled.close()
    pooled.pool.wait(timeout=5)
    # Both idle connections are live: the checkout reuses one of them, no new backend is opened.
    before = _idle_backends(admin)
    assert first in before
    assert _pid(pooled) in before
    assert pooled.pool.get_stats().get("connections_lost", 0) == 0
