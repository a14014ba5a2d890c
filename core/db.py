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
