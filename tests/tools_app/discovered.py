"""A LOCAL tool's functions for modules whose tests are about calling a tool, not discovering it (the invoke path,
the audit spool): each test creates its tool afresh (its database is emptied after each test), but its server lists
the same functions every time. Refreshing each one through the API started the server twice per test, once for the
refresh's probe (a fresh, unpooled connection) and once for the first call (the pooled session): a Python and MCP
SDK start-up each, seconds on a loaded 2-core machine.

`Discovered.refresh` is the refresh itself (`rediscover`: the probe recorded as the breaker's outcome, the functions
stored, the server screened), with one difference: the first tool of a type and config in a module has its server
probed for real, and a later one is given that probe's listing instead of starting the same server again for the
same answer. Discovery itself, its drift, its screen and its failures are tested through the API elsewhere
(test_mcp_api.py, test_screen_discovery.py, test_function_drift.py)."""

from __future__ import annotations

import copy
import json
from typing import Any
from unittest import mock

from tools_app.models import Tool
from tools_app.services import discovery


class Discovered:
    """What the servers of one module listed, by tool type and config (a module-scoped fixture holds one)."""

    def __init__(self) -> None:
        self._probes: dict[str, discovery.Probe] = {}

    def refresh(self, tool_id: int) -> dict[str, Any]:
        """What `POST /tools/{id}/refresh/` answers, done as it does; the server probed only the first time."""
        tool = Tool.objects.select_related("tenant").get(pk=tool_id)
        key = json.dumps([tool.type, tool.config], sort_keys=True, default=str)
        real = discovery.probe_tool

        def probe(tool: Tool, actor: Any = None) -> discovery.Probe:
            if key not in self._probes:
                self._probes[key] = real(tool, actor)
            return copy.deepcopy(self._probes[key])

        with mock.patch.object(discovery, "probe_tool", probe):
            body = discovery.rediscover(tool)
        if not self._probes[key].ok:
            del self._probes[key]  # a failure is not kept: the next tool's server is probed again
        assert body["ok"], body
        return body
