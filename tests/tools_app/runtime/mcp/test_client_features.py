"""What Toolhub's MCP client announces and offers: identity, roots, progress, server logging."""

from __future__ import annotations

import json

from core.version import VERSION
from tests.fixtures.mcp_servers import CLIENT_PROBE
from tests.tools_app.runtime.mcp.conftest import Specs
from tools_app.runtime.mcp import SessionPool


def test_client_says_toolhub_and_offers_roots(pool: SessionPool, specs: Specs) -> None:
    result = pool.call(specs.local(CLIENT_PROBE, roots=["/srv/work"]), "whoareyou", {})
    assert result.success, result.error
    assert result.data["clientInfo"] == {"name": "toolhub", "version": VERSION}
    assert "roots" in result.data["capabilities"]


def test_no_roots_configured_offers_no_roots_capability(pool: SessionPool, specs: Specs) -> None:
    result = pool.call(specs.local(CLIENT_PROBE), "whoareyou", {})
    assert "roots" not in result.data["capabilities"]


def test_roots_list_answers_the_configured_directories(pool: SessionPool, specs: Specs) -> None:
    result = pool.call(specs.local(CLIENT_PROBE, roots=["/srv/work", "/data"]), "roots", {})
    assert result.success, result.error
    assert [r["uri"] for r in result.data["roots"]] == ["file:///srv/work", "file:///data"]


def test_server_log_messages_come_back_with_the_call(pool: SessionPool, specs: Specs) -> None:
    result = pool.call(specs.local(CLIENT_PROBE), "whoareyou", {})
    assert result.meta["logs"] == [{"level": "info", "logger": "probe", "data": "looking at the client"}]


def test_log_values_that_are_configured_secrets_are_masked(pool: SessionPool, specs: Specs) -> None:
    spec = specs.local(CLIENT_PROBE, env={"PROBE_TOKEN": "looking"})
    result = pool.call(spec, "whoareyou", {})
    assert "looking" not in json.dumps(result.meta["logs"])


