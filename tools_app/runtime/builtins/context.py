"""Per-call context handed to every built-in: the plugin ToolContext plus the command and SQL settings."""

from __future__ import annotations

from dataclasses import dataclass, field

from tools_app.runtime.plugin import ToolContext
from tools_app.runtime.sandbox import SandboxPolicy

# Harmless aggregates and scalars, named as sqlglot canonicalises them (plus common raw spellings).
# Nothing here sleeps, reads files, touches the network, changes settings or builds huge values.
_SQL_FUNCTION_GROUPS = {
    "aggregates": "count sum avg min max total group_concat string_agg array_agg median stddev stddev_pop "
    "stddev_samp variance var_pop var_samp bool_and bool_or logical_and logical_or",
    "window": "row_number rank dense_rank percent_rank cume_dist ntile lag lead first_value last_value nth_value",
    "strings": "lower upper length char_length character_length substr substring trim ltrim rtrim replace "
    "concat instr str_position strpos left right lpad rpad pad split_part reverse initcap printf format",
    "conditionals": "coalesce ifnull nvl nullif if iif case greatest least",
    "numbers": "round abs floor ceil ceiling sign mod sqrt power pow ln exp trunc to_number",
    "casts": "cast try_cast array",
    "dates": "date time datetime julianday strftime time_to_str ts_or_ds_to_timestamp str_to_time str_to_date "
    "current_date current_time current_timestamp now extract date_trunc timestamp_trunc date_part age "
    "to_char to_date date_add date_sub datetime_add datetime_sub timestamp_add timestamp_sub unix_to_time "
    "time_to_unix day month year",
}
DEFAULT_SQL_FUNCTIONS: frozenset[str] = frozenset(
    name for group in _SQL_FUNCTION_GROUPS.values() for name in group.split()
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


@dataclass(frozen=True, kw_only=True)
class BuiltinContext(ToolContext):
    """Everything a built-in may touch for one tenant; nothing else is reachable. Every tool gets one."""

    command_allowlist: frozenset[str] = frozenset()
    interpreters_allowed: frozenset[str] = frozenset()
    sql: SqlTarget | None = None
    command_timeout_s: float = 30.0
    output_cap_bytes: int = 8192
    # execute_command's OS sandbox: on unless the operator turned it off (TOOLHUB_COMMAND_SANDBOX=off).
    sandbox: SandboxPolicy = field(default_factory=SandboxPolicy)
