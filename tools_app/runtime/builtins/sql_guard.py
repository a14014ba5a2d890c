"""Layer 1 of the SQL built-ins: sqlglot AST checks (one SELECT, allowlisted tables and functions)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlglot
from sqlglot import TokenType, exp
from sqlglot.errors import SqlglotError

from tools_app.runtime.errors import InvalidParams

MAX_SQL_CHARS = 20_000

# Statement and clause node types that can write, lock, change session state or leave SQL entirely.
_FORBIDDEN_NODES: tuple[type[exp.Expression], ...] = tuple(
    t
    for t in (
        getattr(exp, name, None)
        for name in (
            "Insert",
            "Update",
            "Delete",
            "Merge",
            "Create",
            "Drop",
            "Alter",
            "AlterTable",
            "TruncateTable",
            "Command",
            "Into",
            "Lock",
            "Set",
            "SetItem",
            "Transaction",
            "Commit",
            "Rollback",
            "Pragma",
            "Copy",
            "Use",
            "Grant",
            "Revoke",
            "Comment",
            "Analyze",
            "Attach",
            "Detach",
            "Cache",
            "Uncache",
            "LoadData",
            "Refresh",
            "Kill",
            "Export",
            "Describe",
            "Show",
            "Summarize",
        )
    )
    if isinstance(t, type)
)


@dataclass(frozen=True)
class CheckedQuery:
    sql: str
    tables: frozenset[str]  # the real (non-CTE) tables it reads, normalised


def normalise_table(identifier: exp.Identifier | None, name: str, dialect: str) -> str:
    """Postgres keeps the case of quoted names; everything else compares case-insensitively."""
    quoted = bool(identifier is not None and identifier.args.get("quoted"))
    return name if (dialect == "postgres" and quoted) else name.lower()


def function_name(node: exp.Func) -> str:
    if isinstance(node, exp.Anonymous):
        return str(node.name).lower()
    return node.sql_name().lower()


def check_select(
    sql: str, *, dialect: str, allowed_tables: frozenset[str], allowed_functions: frozenset[str]
) -> CheckedQuery:
    """Parse `sql` in `dialect` and refuse anything but one read-only SELECT over allowlisted tables."""
    if not isinstance(sql, str) or not sql.strip():
        raise InvalidParams("sql must be a non-empty SELECT statement")
    if len(sql) > MAX_SQL_CHARS:
        raise InvalidParams(f"sql is longer than {MAX_SQL_CHARS} characters")
    if "\x00" in sql:
        raise InvalidParams("sql contains a NUL byte")
    try:
        statements = [s for s in sqlglot.parse(sql, read=dialect) if s is not None]
    except SqlglotError as exc:
        raise InvalidParams(f"sql does not parse as {dialect}: {str(exc).splitlines()[0][:300]}") from None
    if len(statements) != 1:
        raise InvalidParams(f"sql must be exactly one statement (rule: one SELECT); found {len(statements)}")
    root = statements[0]
    if not isinstance(root, exp.Select | exp.SetOperation):
        raise InvalidParams(f"only SELECT queries are allowed (rule: one SELECT); got {root.key.upper()}")
    allowed = {t.lower() if not t.startswith('"') else t for t in allowed_tables}
    functions = {f.lower() for f in allowed_functions}
    tables: set[str] = set()
    for node in root.walk():
        if isinstance(node, _FORBIDDEN_NODES):
            raise InvalidParams(
                f"{node.key.upper()} is not allowed (rule: read-only SELECT only; no INTO, locking clauses, "
                "writable CTEs or other statements)"
            )
        if isinstance(node, exp.Func):
            _check_function(node, functions)
        elif isinstance(node, exp.Table):
            name = _check_table(node, dialect, allowed)
            if name:
                tables.add(name)
    _check_call_syntax(sql, dialect, root, functions)
    return CheckedQuery(sql=sql, tables=frozenset(tables))


# Operators that SQLite (and others) also accept in function-call form: `like(pattern, x)`,
# `glob(...)`. The AST shows the operator either way, so the call form is found in the tokens.
_OPERATOR_TOKENS = frozenset(
    getattr(TokenType, name)
    for name in ("LIKE", "ILIKE", "GLOB", "RLIKE", "IRLIKE", "MATCH", "SIMILAR_TO", "SOUNDS_LIKE", "ESCAPE")
    if hasattr(TokenType, name)
)


def _check_call_syntax(sql: str, dialect: str, root: exp.Expression, functions: set[str]) -> None:
    """Every `name(` in the text names an allowlisted function, whatever node sqlglot makes of it.

    sqlglot models some functions as operators (`json_extract(x, p)` becomes the `->` node, `like(p, x)`
    the LIKE node), and operators are not checked against the allowlist: the spelling is.
    """
    try:
        tokens = sqlglot.tokenize(sql, read=dialect)
    except SqlglotError:
        return  # the parse above succeeded; nothing more to learn from tokens
    # Names that may precede "(" without being a call: CTEs with column lists, aliases.
    not_calls = {cte.alias_or_name.lower() for cte in root.find_all(exp.CTE)}
    not_calls |= {a.name.lower() for a in root.find_all(exp.TableAlias) if a.name}
    for i, (token, following) in enumerate(zip(tokens, tokens[1:], strict=False)):
        if following.token_type != TokenType.L_PAREN:
            continue
        name = token.text.lower()
        if token.token_type in _OPERATOR_TOKENS and not _after_operand(tokens, i):
            raise InvalidParams(
                f"operator {token.text.upper()!r} called as a function is not allowed "
                f"(rule: write it as an operator, e.g. `x {token.text.upper()} 'a%'`)"
            )
        if token.token_type == TokenType.VAR and name not in functions and name not in not_calls:
            raise InvalidParams(
                f"function {name!r} is not in the SQL function allowlist (rule: only harmless aggregates and "
                "scalars; pg_sleep, dblink, file and config functions are refused)"
            )


# Tokens after which an expression starts: an operator keyword right after one is a function call.
_EXPRESSION_START = frozenset(
    getattr(TokenType, name)
    for name in (
        "SELECT", "DISTINCT", "COMMA", "L_PAREN", "WHERE", "AND", "OR", "ON", "HAVING", "WHEN", "THEN", "ELSE",
        "CASE", "BY", "IS", "IN", "BETWEEN", "FROM", "JOIN", "ALL", "ANY", "SOME", "EXISTS", "LIMIT", "OFFSET",
        "USING", "ALIAS", "EQ", "NEQ", "LT", "LTE", "GT", "GTE", "PLUS", "DASH", "SLASH", "MOD", "DPIPE",
        "AMP", "PIPE", "CARET", "TILDA", "NULLSAFE_EQ", "COLON", "DCOLON", "RETURNING", "STAR",
    )
    if hasattr(TokenType, name)
)


def _after_operand(tokens: list[Any], index: int) -> bool:
    """Whether the operator at `index` follows an operand (`x LIKE (...)`, `x NOT LIKE (...)`)."""
    j = index - 1
    while j >= 0 and tokens[j].token_type == TokenType.NOT:
        j -= 1
    return j >= 0 and tokens[j].token_type not in _EXPRESSION_START


def _check_function(node: exp.Func, functions: set[str]) -> None:
    if isinstance(node, exp.Binary | exp.Unary):
        return  # an operator sqlglot models as a function (AND, OR, ~, ->, @>, ^): no side effects
    name = function_name(node)
    if isinstance(node.parent, exp.Dot) and node.parent.expression is node:
        raise InvalidParams(f"schema-qualified function {node.parent.sql()!r} is not allowed")
    if name not in functions:
        raise InvalidParams(
            f"function {name!r} is not in the SQL function allowlist (rule: only harmless aggregates and "
            "scalars; pg_sleep, dblink, file and config functions are refused)"
        )


def _check_table(node: exp.Table, dialect: str, allowed: set[str]) -> str | None:
    if not isinstance(node.this, exp.Identifier):
        raise InvalidParams(
            f"table expression {node.sql(dialect=dialect)[:80]!r} is not allowed (rule: plain table names only)"
        )
    name = normalise_table(node.this, node.name, dialect)
    qualifier = [p for p in (node.catalog, node.db) if p]
    if not qualifier and _cte_in_scope(node, node.name.lower()):
        return None
    full = ".".join([*(q.lower() for q in qualifier), name])
    if full not in allowed:
        what = "schema-qualified table" if qualifier else "table"
        raise InvalidParams(
            f"{what} {full!r} is not in the table allowlist (rule: only allowlisted tables may be read; "
            f"allowed: {', '.join(sorted(allowed)) or '(none)'})"
        )
    return full


def _cte_in_scope(table: exp.Table, name: str) -> bool:
    """Whether `table` names a CTE visible where it stands, following SQL scoping exactly.

    A CTE is visible in its query's body and in later CTEs of the same WITH (in every CTE, itself
    included, when RECURSIVE); never inside its own body otherwise, and never outside its query. So
    `WITH secrets AS (SELECT * FROM secrets) ...` still reads the real `secrets` table inside.
    """
    child: Any = table
    parent: Any = table.parent
    while parent is not None:
        with_ = parent.args.get("with_") or parent.args.get("with")
        if isinstance(parent, exp.Query) and isinstance(with_, exp.With):
            ctes = list(with_.expressions)
            if child is with_:
                inner = _enclosing_cte(table, with_)
                index = ctes.index(inner) if inner is not None else len(ctes)
                visible = ctes if with_.args.get("recursive") else ctes[:index]
            else:
                visible = ctes
            if any(cte.alias_or_name.lower() == name for cte in visible):
                return True
        child, parent = parent, parent.parent
    return False


def _enclosing_cte(node: Any, with_: exp.With) -> exp.CTE | None:
    cur: Any = node
    while cur is not None and cur.parent is not with_:
        cur = cur.parent
    return cur if isinstance(cur, exp.CTE) else None
