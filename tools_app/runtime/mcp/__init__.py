"""Django-free MCP client runtime: specs, the session pool, discovery and calls."""

from tools_app.runtime.mcp.discovery import Discovery, FunctionInfo
from tools_app.runtime.mcp.pool import SessionPool, configure_pool, get_pool
from tools_app.runtime.mcp.spec import LocalSpec, RemoteSpec, ServerSpec

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
