"""Database connection helpers."""

from __future__ import annotations

import contextlib
import logging
import select
import threading
from typing import Any

from django.db import connections

logger = logging.getLogger(__name__)


def release_connection(alias: str = "default") -> bool:
    """Give this thread's database connection back before a long wait on something else (a model's answer, an
    MCP call): under the production pool (psycopg_pool, TOOLHUB_DB_POOL_MAX per process) a connection held
    through such a wait is one fewer for every other request of the process, and 128 users waiting on models
    exhausted 8 connections. The next query takes one again (a few hundred microseconds from the pool).

    Never inside a transaction (closing there would lose it): returns False and keeps the connection. True when
    a connection was given back."""
    conn = connections[alias]
    if conn.connection is None or conn.in_atomic_block:
        return False
    conn.close()
    return True


def pooled(alias: str = "default") -> bool:
    """Whether this alias's connections come from a pool (production's psycopg_pool)."""
    return bool((connections[alias].settings_dict.get("OPTIONS") or {}).get("pool"))


def release_pooled_connection(alias: str = "default") -> bool:
    """`release_connection` where connections come from a pool, before a wait on another system (a tool call).

    There a connection held through the wait is one fewer for every other request of the process. Elsewhere
    (SQLite, unpooled PostgreSQL) no other request could have used it, and giving it back would cost the next
    query a new connection (~1 ms on SQLite), so it is kept. True when a connection was given back."""
    return pooled(alias) and release_connection(alias)


# How many connections from the pool one checkout may find cut before it gives up looking (a restart cuts every
# idle connection of the pool: TOOLHUB_DB_POOL_MAX of them at most, and the pool opens new ones meanwhile).
_REVIVE_ATTEMPTS = 16
_reviving = threading.local()


def _cut(raw: Any) -> bool:
    """Whether the server closed this idle pooled connection (a PostgreSQL restart, pg_terminate_backend): its
    socket then has something to read (the server's FATAL message, or end of file) although no query is running.
    One poll(2) with no wait, so a healthy connection costs no round trip; a readable one is probed for real (an
    empty query) since a notice or a NOTIFY also makes it readable."""
    if raw.closed or raw.broken:
        return True
    try:
        poller = select.poll()
        poller.register(raw.fileno(), select.POLLIN | select.POLLERR | select.POLLHUP)
        if not poller.poll(0):
            return False
        if raw.autocommit:
            raw.execute("")
        else:  # the empty query would open a transaction
            raw.autocommit = True
            try:
                raw.execute("")
            finally:
                raw.autocommit = False
    except Exception:  # noqa: BLE001 (any failure of the probe means the connection is unusable)
        return True
    return False


def revive_cut_connection(sender: Any, connection: Any, **kwargs: Any) -> None:
    """`connection_created` receiver: a pooled PostgreSQL connection the server cut while it sat in the pool is
    given back (the pool discards it and opens another) and the checkout is made again, so the first query after
    a restart runs on a live connection instead of failing with `service_unavailable`. Unpooled connections are
    new when created and are left alone."""
    if not getattr(connection, "pool", None) or getattr(_reviving, "on", False):
        return
    _reviving.on = True
    try:
        for _ in range(_REVIVE_ATTEMPTS):
            if connection.connection is None or not _cut(connection.connection):
                return
            logger.info("db.revive: a pooled connection was cut by the server; taking another")
            with contextlib.suppress(Exception):
                connection.close()  # the pool sees a broken connection and replaces it
            connection.connection = None
            connection.connect()
    finally:
        _reviving.on = False
