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




def test_additional_properties_true_allows_extra_arguments(pool: SessionPool, specs: Specs) -> None:
    result = pool.call(specs.local(CLIENT_PROBE), "open_args", {"name": "x", "colour": "blue"})
    assert result.success and result.data == {"name": "x", "colour": "blue"}, result


def test_additional_properties_schema_checks_the_extras(pool: SessionPool, specs: Specs) -> None:
    assert pool.call(specs.local(CLIENT_PROBE), "typed_extras", {"name": "x", "count": 3}).success
    bad = pool.call(specs.local(CLIENT_PROBE), "typed_extras", {"name": "x", "count": "three"})
    assert bad.error_code == "INVALID_PARAMS"


def test_unknown_arguments_still_fail_without_additional_properties(pool: SessionPool, specs: Specs) -> None:
    bad = pool.call(specs.local(CLIENT_PROBE), "roots", {"colour": "blue"})
    assert bad.error_code == "INVALID_PARAMS" and "colour" in (bad.error or "")


def test_task_required_functions_are_marked_unsupported(pool: SessionPool, specs: Specs) -> None:
    found = {f.name: f for f in pool.discover(specs.local(CLIENT_PROBE)).functions}
    assert "MCP task" in found["needs_task"].unsupported_reason
    assert found["roots"].unsupported_reason == ""
