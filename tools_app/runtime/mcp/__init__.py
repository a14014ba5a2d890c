"""Django-free MCP client runtime: specs, the session pool, discovery and calls.

The names below load on first use (PEP 562): importing a submodule (`tools_app.runtime.mcp.spec`, what the tool
configs and so `django.setup()` need) runs this file, and the pool and discovery import the MCP SDK (~1 s of CPU,
issue 35), which only a process that talks to a server needs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tools_app.runtime.mcp.discovery import Discovery, FunctionInfo
    from tools_app.runtime.mcp.pool import SessionPool, configure_pool, get_pool
    from tools_app.runtime.mcp.spec import LocalSpec, RemoteSpec, ServerSpec

_HOMES = {
    "Discovery": "discovery",
    "FunctionInfo": "discovery",
    "SessionPool": "pool",
    "configure_pool": "pool",
    "get_pool": "pool",
    "LocalSpec": "spec",
    "RemoteSpec": "spec",
    "ServerSpec": "spec",
}

__all__ = [
    "Discovery",
    "FunctionInfo",
    "LocalSpec",
    "RemoteSpec",
    "ServerSpec",
    "SessionPool",
    "configure_pool",
    "get_pool",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value  # later lookups skip this function
    return value
