"""SQL built-ins (layer 2): run a guarded SELECT read-only with a timeout; list tables; show DDL."""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import re
import sqlite3
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from pydantic import Field

from tools_app.runtime.builtins.context import BuiltinContext, SqlTarget
from tools_app.runtime.builtins.registry import BuiltinArgs, Safety, builtin
from tools_app.runtime.errors import BusinessError, InvalidParams, ToolTimeout
from tools_app.runtime.result import ToolResult

ROW_CAP = 1000
# Rows alone do not bound memory: one printf() can build a 20 MB value, 100 rows of 1 MB are 100 MB.
RESULT_BYTES_CAP = 1024 * 1024  # kept result, measured as its values' text/bytes length
CELL_CAP = 20_000  # kept rows x columns
VALUE_BYTES_CAP = 1024 * 1024  # one value; SQLite refuses to build a larger string or blob at all
FETCH_BATCH = 20
SHOW_ROWS = 10
SHOW_COLUMNS = 8
CELL_CHARS = 60
TABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]{0,62}$")


def _target(ctx: BuiltinContext) -> SqlTarget:
    if ctx.sql is None:
        raise BusinessError("no database is configured for this tenant's SQL tools")
    try:
        _ = ctx.sql.dialect
    except ValueError as exc:
        raise BusinessError(str(exc)) from None
    return ctx.sql


def _allowed(target: SqlTarget) -> list[str]:
    return sorted({t.lower() for t in target.allowed_tables})


# -- connections ---------------------------------------------------------------------------------


@contextmanager
def _sqlite(target: SqlTarget, deadline: float | None = None) -> Iterator[sqlite3.Connection]:
    """A read-only connection; database errors inside the block become typed tool errors."""
    path = unquote(urlsplit(target.url).path)
    if not path.startswith("/"):
        raise BusinessError("sqlite URL must name an absolute path: sqlite:///abs/path.db")
    try:
        # mode=ro: the file is opened read-only by SQLite itself, whatever the SQL says.
        conn = sqlite3.connect(f"file:{quote(path)}?mode=ro", uri=True, timeout=5, check_same_thread=False)
    except sqlite3.Error as exc:
        raise BusinessError(f"cannot open the SQL target: {exc}") from None
    try:
        conn.execute("PRAGMA query_only=1")
        # No string or blob larger than this is ever built, so a huge value fails inside SQLite.
        conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, VALUE_BYTES_CAP)
        if deadline is not None:
            conn.set_progress_handler(lambda: 1 if time.monotonic() > deadline else 0, 10_000)
        yield conn
    except sqlite3.OperationalError as exc:
        if "interrupted" in str(exc):
            raise ToolTimeout(
                f"query exceeded the statement timeout of {target.statement_timeout_s:g} s"
            ) from None
        raise BusinessError(f"query failed: {exc}") from None
    except sqlite3.Error as exc:
        if "too big" in str(exc):
            raise BusinessError(
                f"query failed: a value in the result would exceed {VALUE_BYTES_CAP} bytes "
                "(rule: results are capped by size, not only by rows)",
                details={"max_value_bytes": VALUE_BYTES_CAP},
            ) from None
        raise BusinessError(f"query failed: {exc}") from None
    finally:
        conn.close()


@contextmanager
def _postgres(target: SqlTarget, timeout_s: float) -> Iterator[Any]:
    """A READ ONLY transaction with a statement timeout; always rolled back and closed."""
    import psycopg

    try:
        conn = psycopg.connect(target.url, connect_timeout=max(int(timeout_s), 2), autocommit=False)
    except psycopg.Error as exc:
        raise BusinessError(f"cannot connect to the SQL target: {type(exc).__name__}") from None
    try:
        with conn.cursor() as cur:
            cur.execute("SET TRANSACTION READ ONLY")
            cur.execute(f"SET LOCAL statement_timeout = {max(int(timeout_s * 1000), 1)}")
        yield conn
    except psycopg.errors.QueryCanceled:
        raise ToolTimeout(f"query exceeded the statement timeout of {timeout_s:g} s") from None
    except psycopg.Error as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise BusinessError(f"query failed: {first}") from None
    finally:
        try:
            conn.rollback()
        except psycopg.Error:
            pass
        conn.close()


# -- execute_sql_query ---------------------------------------------------------------------------


class ExecuteSqlArgs(BuiltinArgs):
    sql: str = Field(description="One SELECT over allowlisted tables; name columns and use LIMIT")


@builtin(
    name="execute_sql_query",
    description="Run one read-only SELECT over the allowlisted tables "
    "(30 s timeout, up to 1,000 rows / 20,000 cells / 1 MiB kept, 10 rows x 8 columns shown).",
    safety=Safety.READ_ONLY,
    default_enabled=False,
)
def execute_sql_query(args: ExecuteSqlArgs, ctx: BuiltinContext) -> ToolResult:
    # sqlglot on first use: importing this package registers every built-in, and so every Django process's start
    # (issue 35) would pay for the parser (~0.2 s of CPU) that only this tool's calls need.
    from tools_app.runtime.builtins.sql_guard import check_select

    target = _target(ctx)
    checked = check_select(
        args.sql,
        dialect=target.dialect,
        allowed_tables=target.allowed_tables,
        allowed_functions=target.allowed_functions,
    )
    columns, rows, cut = run_select(target, checked.sql)
    data = {"columns": columns, "rows": rows, "row_count": len(rows), "truncated": bool(cut), "cut_by": cut}
    return ToolResult.ok(data=data, text=render_table(columns, rows, cut))


def run_select(target: SqlTarget, sql: str) -> tuple[list[str], list[list[Any]], str]:
    """Execute an already-checked SELECT read-only; keep what fits ROW_CAP, CELL_CAP and RESULT_BYTES_CAP.

    Returns (columns, rows, cut) where `cut` names the cap that stopped the fetch ("" when none did).
    """
    timeout = target.statement_timeout_s
    if target.dialect == "sqlite":
        with _sqlite(target, deadline=time.monotonic() + timeout) as conn:
            conn.set_authorizer(_sqlite_authorizer(target))
            cur = conn.execute(sql)
            columns = [d[0] for d in cur.description or ()]
            rows, cut = _fetch_capped(cur, len(columns))
    else:
        with _postgres(target, timeout) as conn, conn.cursor() as cur:
            # prepare=True: the extended protocol refuses a second statement (defence in depth).
            cur.execute(sql, prepare=True)
            columns = [d.name for d in cur.description or ()]
            rows, cut = _fetch_capped(cur, len(columns))
    return columns, rows, cut


def _size(value: Any) -> int:
    if isinstance(value, str | bytes | bytearray):
        return len(value)
    if isinstance(value, list | dict):
        return sum(_size(v) for v in (value.values() if isinstance(value, dict) else value)) + 2
    return 8


def _fetch_capped(cur: Any, width: int) -> tuple[list[list[Any]], str]:
    """Fetch in small batches, stopping at the first cap the kept rows would pass."""
    rows: list[list[Any]] = []
    size = 0
    max_rows = min(ROW_CAP, CELL_CAP // max(width, 1))
    while True:
        batch = cur.fetchmany(FETCH_BATCH)
        if not batch:
            return rows, ""
        for raw in batch:
            if len(rows) >= max_rows:
                return rows, "rows" if max_rows == ROW_CAP else "cells"
            row = [_jsonable(v) for v in raw]
            size += sum(_size(v) for v in row)
            if size > RESULT_BYTES_CAP:
                return rows, "bytes"
            rows.append(row)


def _sqlite_authorizer(target: SqlTarget) -> Any:
    allowed = {t.lower() for t in target.allowed_tables}
    ok_actions = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_FUNCTION, getattr(sqlite3, "SQLITE_RECURSIVE", 33)}

    def authorize(
        action: int, arg1: str | None, arg2: str | None, db: str | None, trigger: str | None
    ) -> int:
        if action in ok_actions:
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_READ:
            # db is None for a CTE's ephemeral table; real tables must be allowlisted ones in `main`.
            if db is None or (db == "main" and arg1 is not None and arg1.lower() in allowed):
                return sqlite3.SQLITE_OK
        return sqlite3.SQLITE_DENY

    return authorize


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return "base64:" + base64.b64encode(bytes(value)).decode()
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return str(value)


CUT_NOTICES = {
    "rows": f"result cut at {ROW_CAP} rows",
    "cells": f"result cut at {CELL_CAP} cells (rows x columns)",
    "bytes": f"result cut at {RESULT_BYTES_CAP} bytes",
}


def render_table(columns: list[str], rows: list[list[Any]], cut: str | bool) -> str:
    """A plain-text table of at most SHOW_ROWS x SHOW_COLUMNS, with notices for what is hidden."""
    shown_cols = columns[:SHOW_COLUMNS]

    def cell(v: Any) -> str:
        s = "NULL" if v is None else str(v)
        s = s.replace("\n", " ")
        return s if len(s) <= CELL_CHARS else s[: CELL_CHARS - 1] + "…"

    lines = [" | ".join(shown_cols)]
    lines += [" | ".join(cell(v) for v in row[:SHOW_COLUMNS]) for row in rows[:SHOW_ROWS]]
    notices = []
    if len(rows) > SHOW_ROWS:
        notices.append(f"showing {SHOW_ROWS} of {len(rows)} rows")
    if len(columns) > SHOW_COLUMNS:
        notices.append(f"showing {SHOW_COLUMNS} of {len(columns)} columns")
    if cut:
        notices.append(f"{CUT_NOTICES.get(str(cut), CUT_NOTICES['rows'])}; add a LIMIT or narrow the query")
    footer = f"{len(rows)} row(s)" + (f" [truncated: {'; '.join(notices)}]" if notices else "")
    return "\n".join([*lines, footer])


# -- query_all_tables ----------------------------------------------------------------------------


class NoArgs(BuiltinArgs):
    pass


@builtin(
    name="query_all_tables",
    description="List the allowlisted tables that exist, with their columns.",
    safety=Safety.READ_ONLY,
)
def query_all_tables(args: NoArgs, ctx: BuiltinContext) -> ToolResult:
    target = _target(ctx)
    tables = [{"name": name, "columns": cols} for name, cols in _existing_tables(target)]
    text = (
        "\n".join(f"{t['name']}({', '.join(t['columns'])})" for t in tables)
        or "(no allowlisted tables exist)"
    )
    return ToolResult.ok(data={"tables": tables}, text=text)


def _existing_tables(target: SqlTarget) -> list[tuple[str, list[str]]]:
    allowed = _allowed(target)
    out: list[tuple[str, list[str]]] = []
    if target.dialect == "sqlite":
        with _sqlite(target) as conn:
            names = {
                r[0].lower(): r[0]
                for r in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")
            }
            for name in allowed:
                if name in names:
                    cols = [r[1] for r in conn.execute("SELECT * FROM pragma_table_info(?)", (names[name],))]
                    out.append((name, cols))
        return out
    with _postgres(target, target.statement_timeout_s) as conn, conn.cursor() as cur:
        for name in allowed:
            cur.execute(
                "SELECT a.attname FROM pg_catalog.pg_attribute a WHERE a.attrelid = to_regclass(%s) "
                "AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
                (_pg_ident(name),),
            )
            cols = [r[0] for r in cur.fetchall()]
            if cols:
                out.append((name, cols))
    return out


def _pg_ident(name: str) -> str:
    return ".".join('"' + part.replace('"', '""') + '"' for part in name.split("."))


# -- query_table_schema --------------------------------------------------------------------------


class TableSchemaArgs(BuiltinArgs):
    table: str = Field(description="An allowlisted table name")


@builtin(
    name="query_table_schema",
    description="Show the CREATE TABLE DDL of one allowlisted table.",
    safety=Safety.READ_ONLY,
)
def query_table_schema(args: TableSchemaArgs, ctx: BuiltinContext) -> ToolResult:
    target = _target(ctx)
    name = args.table.strip()
    if not all(TABLE_NAME.match(part) for part in name.split(".")) or name.count(".") > 1:
        raise InvalidParams(f"table name {args.table!r} is not a plain identifier (rule: letters, digits, _)")
    if name.lower() not in _allowed(target):
        raise InvalidParams(
            f"table {name!r} is not in the table allowlist; allowed: {', '.join(_allowed(target)) or '(none)'}"
        )
    ddl = _sqlite_ddl(target, name) if target.dialect == "sqlite" else _postgres_ddl(target, name.lower())
    if ddl is None:
        raise BusinessError(f"table {name!r} is allowlisted but does not exist")
    return ToolResult.ok(data={"table": name.lower(), "ddl": ddl}, text=ddl)


def _sqlite_ddl(target: SqlTarget, name: str) -> str | None:
    with _sqlite(target) as conn:
        row = conn.execute(
            "SELECT sql FROM sqlite_master WHERE type IN ('table', 'view') AND lower(name) = lower(?)",
            (name,),
        ).fetchone()
    return str(row[0]) if row and row[0] else None


def _postgres_ddl(target: SqlTarget, name: str) -> str | None:
    with _postgres(target, target.statement_timeout_s) as conn, conn.cursor() as cur:
        cur.execute("SELECT to_regclass(%s)::oid", (_pg_ident(name),))
        row = cur.fetchone()
        if row is None or row[0] is None:
            return None
        oid = row[0]
        cur.execute(
            "SELECT a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod), a.attnotnull, "
            "pg_catalog.pg_get_expr(d.adbin, d.adrelid) FROM pg_catalog.pg_attribute a "
            "LEFT JOIN pg_catalog.pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum "
            "WHERE a.attrelid = %s AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
            (oid,),
        )
        cols = cur.fetchall()
        cur.execute(
            "SELECT pg_catalog.pg_get_constraintdef(c.oid) FROM pg_catalog.pg_constraint c "
            "WHERE c.conrelid = %s AND c.contype IN ('p', 'u', 'f', 'c') ORDER BY c.contype DESC, c.conname",
            (oid,),
        )
        constraints = [r[0] for r in cur.fetchall()]
    lines = []
    for col, typ, notnull, default in cols:
        line = f"    {_pg_ident(col) if not re.fullmatch(r'[a-z_][a-z0-9_]*', col) else col} {typ}"
        if default is not None:
            line += f" DEFAULT {default}"
        if notnull:
            line += " NOT NULL"
        lines.append(line)
    lines += [f"    {c}" for c in constraints]
    return f"CREATE TABLE {name} (\n" + ",\n".join(lines) + "\n);"
