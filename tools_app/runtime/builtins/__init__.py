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

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

__all__ = [
    "BuiltinContext",
    "Safety",
    "SqlTarget",
    "all_builtins",
    "get_builtin",
    "invoke_builtin",
]
