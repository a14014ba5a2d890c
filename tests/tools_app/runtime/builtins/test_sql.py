"""SQL built-ins on SQLite (always) and PostgreSQL (when reachable): the refusal corpus and both layers."""

from __future__ import annotations

import dataclasses
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tools_app.runtime.builtins import BuiltinContext, SqlTarget, invoke_builtin
from tools_app.runtime.builtins.sql import CELL_CAP, RESULT_BYTES_CAP, ROW_CAP, VALUE_BYTES_CAP, run_select
from tools_app.runtime.builtins.sql_demo import DEFAULT_DEMO_TABLES, create_demo_database, demo_url
from tools_app.runtime.errors import RuntimeToolError

PG_BASE = "postgresql://postgres@127.0.0.1:5432/test"
SECRETS_DDL = "CREATE TABLE secrets (id INTEGER PRIMARY KEY, token TEXT NOT NULL)"


class Db:
    """One SQL target plus a privileged side connection used to set up and to snapshot state."""

    def __init__(self, dialect: str, target: SqlTarget, raw: Any) -> None:
        self.dialect = dialect
        self.target = target
        self.raw = raw

    def query(self, sql: str) -> list[tuple[Any, ...]]:
        cur = self.raw.execute(sql)
        return list(cur.fetchall())

    def snapshot(self) -> dict[str, Any]:
        state: dict[str, Any] = {}
        for table in ("customers", "products", "orders", "secrets"):
            state[table] = sorted(map(repr, self.query(f"SELECT * FROM {table}")))
        if self.dialect == "sqlite":
            state["schema"] = self.query("SELECT name, sql FROM sqlite_master ORDER BY name")
        else:
            state["schema"] = self.query(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY 1"
            )
        return state


@pytest.fixture(scope="module")
def sqlite_db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Db]:
    path = create_demo_database(tmp_path_factory.mktemp("sql") / "demo.db")
    raw = sqlite3.connect(path, isolation_level=None)
    raw.execute(SECRETS_DDL)
    raw.execute("INSERT INTO secrets VALUES (1, 'hunter2')")
    raw.execute("CREATE TABLE many (n INTEGER)")
    raw.execute("BEGIN")
    raw.executemany("INSERT INTO many VALUES (?)", [(i,) for i in range(ROW_CAP + 50)])
    raw.execute("COMMIT")
    target = SqlTarget(
        url=demo_url(path), allowed_tables=DEFAULT_DEMO_TABLES | {"many"}, statement_timeout_s=5
    )
    yield Db("sqlite", target, raw)
    raw.close()


@pytest.fixture(scope="module")
def postgres_db(sqlite_db: Db) -> Iterator[Db]:
    psycopg = pytest.importorskip("psycopg")
    try:
        raw = psycopg.connect(PG_BASE, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError:
        pytest.skip("PostgreSQL at 127.0.0.1:5432 is unreachable")
    schema = f"th_builtin_{uuid.uuid4().hex[:12]}"
    raw.execute(f"CREATE SCHEMA {schema}")
    raw.execute(f"SET search_path = {schema}")
    raw.execute(
        "CREATE TABLE customers (id integer PRIMARY KEY, name text NOT NULL, email text NOT NULL UNIQUE, "
        "city text, created_at date NOT NULL)"
    )
    raw.execute(
        "CREATE TABLE products (id integer PRIMARY KEY, sku text NOT NULL, name text NOT NULL, "
        "price_cents integer NOT NULL DEFAULT 0, stock integer NOT NULL DEFAULT 0)"
    )
    raw.execute(
        "CREATE TABLE orders (id integer PRIMARY KEY, customer_id integer REFERENCES customers(id), "
        "product_id integer REFERENCES products(id), quantity integer NOT NULL, status text NOT NULL, "
        "ordered_at date NOT NULL)"
    )
    raw.execute(SECRETS_DDL)
    raw.execute("CREATE TABLE many (n integer)")
    for table in ("customers", "products", "orders", "secrets", "many"):
        rows = sqlite_db.query(f"SELECT * FROM {table}")
        marks = ", ".join(["%s"] * len(rows[0]))
        with raw.cursor() as cur:
            cur.executemany(f"INSERT INTO {table} VALUES ({marks})", rows)
    url = f"{PG_BASE}?options=-csearch_path%3D{schema}"
    target = SqlTarget(url=url, allowed_tables=DEFAULT_DEMO_TABLES | {"many"}, statement_timeout_s=5)
    yield Db("postgres", target, raw)
    raw.execute(f"DROP SCHEMA {schema} CASCADE")
    raw.close()


@pytest.fixture(params=["sqlite", "postgres"])
def sqldb(request: pytest.FixtureRequest) -> Db:
    return request.getfixturevalue(f"{request.param}_db")


@pytest.fixture
def sql_ctx(sqldb: Db, tmp_path: Path) -> BuiltinContext:
    return BuiltinContext(tenant_slug="demo", workspace=tmp_path, sql=sqldb.target)


def run(ctx: BuiltinContext, tool: str, **arguments: Any):
    return invoke_builtin(tool, tool, arguments, ctx)


# (id, sql, rule fragment). All refused by layer 1 with INVALID_PARAMS; nothing may change.
CORPUS = [
    ("select-then-drop", "SELECT 1; DROP TABLE orders", "exactly one statement"),
    ("commit-then-drop", "COMMIT; DROP TABLE orders", "exactly one statement"),
    ("trailing-delete", "SELECT * FROM orders; DELETE FROM orders", "exactly one statement"),
    (
        "comment-hides-statement",
        "SELECT 1 FROM orders -- harmless\n; DELETE FROM orders",
        "exactly one statement",
    ),
    ("block-comment-then-statement", "SELECT 1 /* x */; DELETE FROM orders /* y */", "exactly one statement"),
    ("drop", "DROP TABLE orders", "only SELECT"),
    ("delete", "DELETE FROM orders", "only SELECT"),
    ("update", "UPDATE orders SET quantity = 0", "only SELECT"),
    ("insert", "INSERT INTO orders (id) VALUES (99)", "only SELECT"),
    (
        "writable-cte",
        "WITH gone AS (DELETE FROM orders RETURNING *) SELECT * FROM gone",
        "DELETE is not allowed",
    ),
    (
        "writable-cte-update",
        "WITH u AS (UPDATE orders SET quantity = 9 RETURNING id) SELECT * FROM u",
        "UPDATE",
    ),
    ("select-into", "SELECT * INTO stolen FROM orders", "INTO is not allowed"),
    ("for-update", "SELECT * FROM orders FOR UPDATE", "LOCK is not allowed"),
    ("forbidden-table", "SELECT * FROM secrets", "'secrets' is not in the table allowlist"),
    ("forbidden-in-subquery", "SELECT * FROM orders WHERE id IN (SELECT id FROM secrets)", "'secrets'"),
    ("forbidden-in-union", "SELECT name FROM customers UNION SELECT token FROM secrets", "'secrets'"),
    ("forbidden-in-join", "SELECT * FROM orders JOIN secrets ON true", "'secrets'"),
    (
        "cte-named-like-allowed-hides-forbidden",
        "WITH orders AS (SELECT * FROM secrets) SELECT * FROM orders",
        "'secrets'",
    ),
    (
        "cte-self-reference-reads-real-table",
        "WITH secrets AS (SELECT * FROM secrets) SELECT * FROM secrets",
        "'secrets'",
    ),
    (
        "cte-out-of-scope",
        "SELECT * FROM (WITH secrets AS (SELECT 1 AS x) SELECT * FROM secrets) s, secrets",
        "'secrets'",
    ),
    (
        "cte-later-not-visible-earlier",
        "WITH a AS (SELECT * FROM b), b AS (SELECT 1 AS x) SELECT * FROM a",
        "'b'",
    ),
    ("quoted-forbidden", 'SELECT * FROM "secrets"', "'secrets'"),
    ("schema-qualified-catalog", "SELECT * FROM pg_catalog.pg_tables", "schema-qualified table"),
    ("schema-qualified-allowed-name", "SELECT * FROM main.orders", "schema-qualified table"),
    ("information-schema", "SELECT * FROM information_schema.tables", "schema-qualified table"),
    ("sqlite-master", "SELECT * FROM sqlite_master", "'sqlite_master'"),
    ("pg-sleep", "SELECT pg_sleep(10)", "'pg_sleep'"),
    ("pg-sleep-qualified", "SELECT pg_catalog.pg_sleep(10) FROM orders", "schema-qualified function"),
    ("dblink", "SELECT * FROM orders WHERE dblink('x', 'y') IS NULL", "'dblink'"),
    ("lo-import", "SELECT lo_import('/etc/passwd')", "'lo_import'"),
    ("pg-read-file", "SELECT pg_read_file('/etc/passwd')", "'pg_read_file'"),
    ("set-config", "SELECT set_config('default_transaction_read_only', 'off', false)", "'set_config'"),
    ("query-to-xml", "SELECT query_to_xml('DELETE FROM orders', true, true, '')", "'query_to_xml'"),
    ("table-function", "SELECT * FROM generate_series(1, 3)", "not allowed"),
    ("unknown-function", "SELECT load_extension('x')", "'load_extension'"),
    ("not-sql", "this is not sql at all", ""),
    ("empty", "   ", "non-empty"),
]


@pytest.mark.parametrize(("sql", "rule"), [c[1:] for c in CORPUS], ids=[c[0] for c in CORPUS])
def test_refusal_corpus_changes_nothing(sqldb: Db, sql_ctx: BuiltinContext, sql: str, rule: str) -> None:
    before = sqldb.snapshot()
    result = run(sql_ctx, "execute_sql_query", sql=sql)
    assert result.error_code == "INVALID_PARAMS", result
    assert rule in (result.error or ""), result.error
    assert "hunter2" not in repr(result)
    assert sqldb.snapshot() == before


@pytest.mark.parametrize(
    "sql",
    [
        "DELETE FROM orders",
        "UPDATE orders SET quantity = 0",
        "CREATE TABLE stolen AS SELECT * FROM orders",
        "DROP TABLE orders",
    ],
)
def test_layer_two_refuses_writes_even_without_layer_one(sqldb: Db, sql: str) -> None:
    before = sqldb.snapshot()
    with pytest.raises(RuntimeToolError):
        run_select(sqldb.target, sql)
    assert sqldb.snapshot() == before


def test_layer_two_refuses_multiple_statements_on_postgres(postgres_db: Db) -> None:
    before = postgres_db.snapshot()
    with pytest.raises(RuntimeToolError):
        run_select(postgres_db.target, "SELECT 1; COMMIT; DELETE FROM orders")
    assert postgres_db.snapshot() == before


def test_select_with_cte_union_join_and_functions(sql_ctx: BuiltinContext) -> None:
    sql = (
        "WITH big AS (SELECT customer_id, sum(quantity) AS qty FROM orders GROUP BY customer_id) "
        "SELECT upper(c.name) AS name, coalesce(b.qty, 0) AS qty FROM customers c "
        "LEFT JOIN big b ON b.customer_id = c.id "
        "UNION ALL SELECT 'TOTAL', count(*) FROM orders ORDER BY qty DESC, name"
    )
    result = run(sql_ctx, "execute_sql_query", sql=sql)
    assert result.success, result
    assert result.data["columns"] == ["name", "qty"]
    assert result.data["rows"][0] == ["TOTAL", 6]
    assert result.data["row_count"] == 5 and result.data["truncated"] is False


def test_quoted_allowed_table_and_cte_shadowing_an_allowed_name(sql_ctx: BuiltinContext) -> None:
    assert run(sql_ctx, "execute_sql_query", sql='SELECT count(*) FROM "orders"').data["rows"] == [[6]]
    result = run(sql_ctx, "execute_sql_query", sql="WITH orders AS (SELECT 1 AS x) SELECT * FROM orders")
    assert result.success and result.data["rows"] == [[1]]


def test_row_cap_and_display_truncation(sql_ctx: BuiltinContext) -> None:
    result = run(sql_ctx, "execute_sql_query", sql="SELECT n, n, n, n, n, n, n, n, n, n FROM many ORDER BY n")
    assert result.success
    assert result.data["row_count"] == ROW_CAP and result.data["truncated"] is True
    lines = result.text.splitlines()
    assert len(lines) == 1 + 10 + 1  # header, 10 rows, footer
    assert len(lines[0].split(" | ")) == 8
    assert (
        "showing 10 of 1000 rows" in lines[-1]
        and "8 of 10 columns" in lines[-1]
        and "cut at 1000" in lines[-1]
    )


def test_statement_timeout(sqldb: Db, sql_ctx: BuiltinContext) -> None:
    fast = dataclasses.replace(sql_ctx, sql=dataclasses.replace(sqldb.target, statement_timeout_s=0.3))
    sql = "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT count(*) FROM r"
    result = run(fast, "execute_sql_query", sql=sql)
    assert result.error_code == "TIMEOUT", result


def test_query_all_tables_lists_only_allowlisted_existing_tables(sqldb: Db, sql_ctx: BuiltinContext) -> None:
    ctx = dataclasses.replace(
        sql_ctx,
        sql=dataclasses.replace(sqldb.target, allowed_tables=frozenset({"customers", "orders", "ghost"})),
    )
    result = run(ctx, "query_all_tables")
    assert result.success
    assert [t["name"] for t in result.data["tables"]] == ["customers", "orders"]
    assert "customer_id" in result.data["tables"][1]["columns"]
    assert "secrets" not in result.text


@pytest.mark.parametrize(
    ("table", "code", "fragment"),
    [
        ("secrets", "INVALID_PARAMS", "not in the table allowlist"),
        ("orders; DROP TABLE orders", "INVALID_PARAMS", "plain identifier"),
        ('"orders"', "INVALID_PARAMS", "plain identifier"),
        ("pg_catalog.pg_user", "INVALID_PARAMS", "not in the table allowlist"),
        ("many2", "INVALID_PARAMS", "not in the table allowlist"),
    ],
)
def test_query_table_schema_refusals(
    sqldb: Db, sql_ctx: BuiltinContext, table: str, code: str, fragment: str
) -> None:
    before = sqldb.snapshot()
    result = run(sql_ctx, "query_table_schema", table=table)
    assert result.error_code == code and fragment in (result.error or ""), result
    assert sqldb.snapshot() == before


def test_query_table_schema_returns_ddl(sql_ctx: BuiltinContext) -> None:
    result = run(sql_ctx, "query_table_schema", table="Orders")
    assert result.success, result
    ddl = result.data["ddl"]
    assert ddl.startswith("CREATE TABLE") and "orders" in ddl.lower()
    assert "customer_id" in ddl and "quantity" in ddl


def test_no_sql_target_is_a_business_error(tmp_path: Path) -> None:
    ctx = BuiltinContext(tenant_slug="demo", workspace=tmp_path)
    assert run(ctx, "execute_sql_query", sql="SELECT 1").error_code == "BUSINESS_ERROR"


def test_demo_database(tmp_path: Path) -> None:
    path = create_demo_database(tmp_path / "x" / "demo.db")
    with sqlite3.connect(path) as conn:
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert names == set(DEFAULT_DEMO_TABLES)
        assert conn.execute("SELECT count(*) FROM orders").fetchone()[0] > 0


REALISTIC = {
    "sqlite": (
        "SELECT c.name, lag(o.id) OVER (ORDER BY o.id) AS prev, printf('%05d', o.id) AS ref, "
        "date(o.ordered_at, '+1 day') AS next_day, ifnull(c.city, '-') AS city, round(p.price_cents / 100.0, 2) "
        "FROM orders o JOIN customers c ON c.id = o.customer_id JOIN products p ON p.id = o.product_id "
        "WHERE c.name LIKE 'A%' AND o.id IN (1, 2, 4) ORDER BY o.id LIMIT 10"
    ),
    "postgres": (
        "SELECT c.name, lag(o.id) OVER (ORDER BY o.id) AS prev, to_char(o.ordered_at, 'YYYY-MM') AS month, "
        "split_part(c.email, '@', 2) AS domain, coalesce(c.city, '-') AS city, round(p.price_cents / 100.0, 2) "
        "FROM orders o JOIN customers c ON c.id = o.customer_id JOIN products p ON p.id = o.product_id "
        "WHERE c.name ILIKE 'a%' AND o.id = ANY(ARRAY[1, 2, 4]) ORDER BY o.id LIMIT 10"
    ),
}


def test_realistic_queries_pass_both_layers(sqldb: Db, sql_ctx: BuiltinContext) -> None:
    result = run(sql_ctx, "execute_sql_query", sql=REALISTIC[sqldb.dialect])
    assert result.success, result
    assert result.data["row_count"] == 3
    assert result.data["columns"][:3] == ["name", "prev", result.data["columns"][2]]
    assert all(row[0] in ("Ada Lovelace", "Alan Turing") for row in result.data["rows"])


def test_missing_sqlite_file_is_a_business_error(tmp_path: Path) -> None:
    ctx = BuiltinContext(
        tenant_slug="demo",
        workspace=tmp_path,
        sql=SqlTarget(url=f"sqlite:///{tmp_path}/nope.db", allowed_tables=frozenset({"orders"})),
    )
    for tool, args in (("query_all_tables", {}), ("query_table_schema", {"table": "orders"})):
        assert run(ctx, tool, **args).error_code == "BUSINESS_ERROR"
    assert not (tmp_path / "nope.db").exists()


# -- memory caps and operator-style functions ---------------------------


@pytest.fixture
def sqlite_ctx(sqlite_db: Db, tmp_path: Path) -> BuiltinContext:
    return BuiltinContext(tenant_slug="demo", workspace=tmp_path, sql=sqlite_db.target)


@pytest.mark.parametrize(
    "sql", ["SELECT printf('%.*c', 20000000, 'x') AS big", "SELECT replace(printf('%.*c', 900000, 'x'), 'x', 'xxxx')"]
)
def test_one_huge_value_is_never_built_inside_sqlite(sqlite_ctx: BuiltinContext, sql: str) -> None:
    """SQLite's length limit stops the value being built: printf gives NULL, other builders fail."""
    result = run(sqlite_ctx, "execute_sql_query", sql=sql)
    if result.success:
        assert result.data["rows"] == [[None]]
    else:
        assert result.error_code == "BUSINESS_ERROR"
        assert str(VALUE_BYTES_CAP) in (result.error or "")


def test_many_large_rows_are_cut_by_bytes_not_only_rows(sqlite_ctx: BuiltinContext) -> None:
    result = run(
        sqlite_ctx, "execute_sql_query", sql="SELECT printf('%.*c', 1000000, 'x') AS mb FROM many LIMIT 100"
    )
    assert result.success, result
    kept = sum(len(row[0]) for row in result.data["rows"])
    assert kept <= RESULT_BYTES_CAP
    assert result.data["row_count"] == 1
    assert result.data["truncated"] is True and result.data["cut_by"] == "bytes"
    assert f"cut at {RESULT_BYTES_CAP} bytes" in result.text


def test_wide_results_are_cut_by_cells(sql_ctx: BuiltinContext) -> None:
    columns = ", ".join(["n"] * 40)
    result = run(sql_ctx, "execute_sql_query", sql=f"SELECT {columns} FROM many ORDER BY n")
    assert result.success, result
    assert result.data["row_count"] == CELL_CAP // 40
    assert result.data["cut_by"] == "cells"


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT like('%a%', name) FROM customers",
        "SELECT name FROM customers WHERE like('%a%', name)",
        "SELECT name FROM customers WHERE NOT glob('*a*', name)",
        "SELECT json_extract(name, '$.a') FROM customers",
        "SELECT name FROM customers WHERE json_extract(name, '$.a') IS NULL",
    ],
)
def test_operator_style_functions_go_through_the_allowlist(sql_ctx: BuiltinContext, sql: str) -> None:
    result = run(sql_ctx, "execute_sql_query", sql=sql)
    assert not result.success
    assert result.error_code == "INVALID_PARAMS"
    assert "allowlist" in (result.error or "") or "called as a function" in (result.error or "")


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT name FROM customers WHERE name LIKE '%a%'",
        "SELECT name FROM customers WHERE name LIKE ('%' || 'a' || '%')",
        "SELECT name FROM customers WHERE name NOT LIKE ('%z%')",
        "WITH x(a, b) AS (SELECT 1, 2) SELECT a FROM x",
    ],
)
def test_operators_written_as_operators_still_work(sql_ctx: BuiltinContext, sql: str) -> None:
    result = run(sql_ctx, "execute_sql_query", sql=sql)
    assert result.success, result
