"""Built-in tools: importing this package registers every built-in (each module self-registers)."""

from __future__ import annotations

import importlib
import pkgutil

from tools_app.runtime.builtins.registry import (
    BuiltinContext,
    Safety,
    SqlTarget,
    all_builtins,
    get_builtin,
    invoke_builtin,
)

# sql_guard registers nothing: sql.py imports it (and with it the sqlglot parser, ~0.2 s of CPU) on its first query,
# not every Django process's start, which imports this package through the tool wiring (issue 35).
_REGISTER_NOTHING = frozenset({"sql_guard"})

for _module in pkgutil.iter_modules(__path__):
    if _module.name not in _REGISTER_NOTHING:
        importlib.import_module(f"{__name__}.{_module.name}")

__all__ = [
    "BuiltinContext",
    "Safety",
    "SqlTarget",
    "all_builtins",
    "get_builtin",
    "invoke_builtin",
]
