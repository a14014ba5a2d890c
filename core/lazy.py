"""A package's public names loaded on first use (PEP 562): what a package `__init__` exports without importing the
heavy submodules behind them until someone asks (issue 35: a Django start imports the light parts only)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any


def lazy_names(package: str, homes: dict[str, str]) -> Callable[[str], Any]:
    """The module `__getattr__` of `package`: a name in `homes` is imported from `package.<home>` on first lookup and
    kept on the package (later lookups do not come here); any other name is an AttributeError, as usual."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{home}"), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
