"""Django-free MCP client runtime: specs, the session pool, discovery and calls.

The names below load on first use (PEP 562): importing a submodule (`tools_app.runtime.mcp.spec`, what the tool
configs and so `django.setup()` need) runs this file, and the pool and discovery import the MCP SDK (~1 s of CPU,
issue 35), which only a process that talks to a server needs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.lazy import lazy_names

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


__getattr__ = lazy_names(__name__, _HOMES)
