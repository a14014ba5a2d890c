"""The MCP runtime tests' fixtures (a loopback pool whose children are checked for leaks, marked specs)."""

from tests.tools_app.runtime.mcp.conftest import make_pool, marker, specs

__all__ = ["make_pool", "marker", "specs"]
