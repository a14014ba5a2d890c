"""A tool's listing probed once where a test needs it twice. Tests about calling a tool (the invoke path, the audit
spool, the reference servers' answers) refreshed it through the API first, and the refresh's probe (a fresh,
unpooled connection) started its server once more for the same listing: a Python or Node and MCP SDK start-up each,
seconds on a loaded 2-core machine, and once more per test where each test creates the same tool afresh (its
database is emptied after each test).

Within `Discovered.probes()` the product runs unchanged (the Test button, the refresh endpoint, `rediscover`: the
probe recorded as the breaker's outcome, the functions stored, the server screened), except that a probe of a tool
whose type and config a probe already met (earlier in the block, or in the module, as the holder's scope says) is
answered with that probe's real listing instead of starting the same server again. A failed probe is never kept.
Discovery itself, its drift, its screen and its failures are tested through the API without it (test_mcp_api.py,
test_screen_discovery.py, test_function_drift.py)."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

from tools_app.models import Tool
from tools_app.services import discovery


class Discovered:
    """The listings probed so far, by tool type and config (a module-scoped fixture holds one for a module)."""

    def __init__(self) -> None:
        self._probes: dict[str, discovery.Probe] = {}

    @contextmanager
    def probes(self) -> Iterator[None]:
        real = discovery.probe_tool

        def probe(tool: Tool, actor: Any = None) -> discovery.Probe:
            key = json.dumps([tool.type, tool.config], sort_keys=True, default=str)
            if key not in self._probes:
                found = real(tool, actor)
                if not found.ok:
                    return found
                self._probes[key] = found
            return copy.deepcopy(self._probes[key])

        with mock.patch.object(discovery, "probe_tool", probe):
            yield

    def refresh(self, api: Any, tool_id: int) -> dict[str, Any]:
        """`POST /tools/{id}/refresh/` within `probes()`: its answer, asserted ok."""
        with self.probes():
            resp = api.post(f"/api/v1/tools/{tool_id}/refresh/")
        assert resp.status_code == 200 and resp.json()["ok"], resp.content
        return dict(resp.json())
