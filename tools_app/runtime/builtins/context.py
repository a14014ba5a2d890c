"""Per-call context handed to every built-in: the tenant's workspace, command and SQL settings."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

# Harmless aggregates and scalars, named as sqlglot canonicalises them (plus common raw spellings).
DEFAULT_SQL_FUNCTIONS: frozenset[str] = frozenset(
    {
        # aggregates
        "count",
        "sum",
        "avg",
        "min",
        "max",
        "group_concat",
        "string_agg",
        "total",
        # strings
        "lower",
        "upper",
        "length",
        "substr",
        "substring",
        "trim",
        "ltrim",
        "rtrim",
        "replace",
        "concat",
        "instr",
        "str_position",
        "left",
        "right",
        "lpad",
        "rpad",
        # null handling and conditionals
        "coalesce",
        "ifnull",
        "nullif",
        "if",
        "iif",
        "case",
        "greatest",
        "least",
        # numbers
        "round",
        "abs",
        "floor",
        "ceil",
        "ceiling",
        "sign",
        "mod",
        # casts
        "cast",
        "try_cast",
        # dates and times
        "date",
        "time",
        "datetime",
        "julianday",
        "strftime",
        "time_to_str",
        "ts_or_ds_to_timestamp",
        "str_to_time",
        "current_date",
        "current_time",
        "current_timestamp",
        "now",
        "extract",
        "date_trunc",
        "timestamp_trunc",
        "date_part",
        "age",
        "to_char",
        "to_date",
        "date_add",
        "date_sub",
        "datetime_add",
        "datetime_sub",
        "timestamp_add",
        "timestamp_sub",
        "unix_to_time",
        "time_to_unix",
        "day",
        "month",
        "year",
    }
)


@dataclass(frozen=True)
class SqlTarget:
    """The database the SQL built-ins read: `sqlite:///abs/path.db` or `postgresql://user@host:port/db`."""

    url: str
    allowed_tables: frozenset[str] = frozenset()
    allowed_functions: frozenset[str] = field(default=DEFAULT_SQL_FUNCTIONS)
    statement_timeout_s: float = 30.0

    @property
    def dialect(self) -> str:
        if self.url.startswith("sqlite:"):
            return "sqlite"
        if self.url.startswith(("postgresql:", "postgres:")):
            return "postgres"
        raise ValueError(f"unsupported SQL target URL scheme in {self.url.split(':', 1)[0]!r}")


@dataclass(frozen=True)
class BuiltinContext:
    """Everything a built-in may touch for one tenant; nothing else is reachable."""

    tenant_slug: str
    workspace: Path
    command_allowlist: frozenset[str] = frozenset()
    interpreters_allowed: frozenset[str] = frozenset()
    sql: SqlTarget | None = None
    command_timeout_s: float = 30.0
    output_cap_bytes: int = 8192
