"""Database connection helpers."""

from __future__ import annotations

from django.db import connections


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
