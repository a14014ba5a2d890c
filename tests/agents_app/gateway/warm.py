"""Discovery that keeps its server process for the test's calls (one MCP server start per tool, not two)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from tools_app.runtime.mcp.discovery import Discovery, list_server_texts
from tools_app.runtime.mcp.spec import ServerSpec
from tools_app.wiring.pool import pool


@contextmanager
def discovery_kept_for_calls() -> Iterator[None]:
    """Discovery (the tool's refresh) through the pool's warm session instead of a throwaway probe connection, so
    that the test's calls through the gateway reuse the server process the discovery started rather than start a
    second one (~1.4 s of CPU each: a Python process importing the MCP SDK). The same real server answers the same
    initialize, tools/list, prompts/list and resources/list (what `probe_connection` asks); only the process is kept.
    Where the pool is not the local one (a runner facade), discovery probes as usual."""
    current = pool()
    discover = getattr(current, "discover", None)
    if discover is None:
        yield
        return

    def probe_on_the_warm_session(spec: ServerSpec) -> Discovery:
        found: Discovery = discover(spec)
        found.prompts, found.resources = current.session_request(spec, list_server_texts)
        return found

    current.probe = probe_on_the_warm_session  # type: ignore[method-assign]
    try:
        yield
    finally:
        del current.probe  # the class's own probe again
