"""LOCAL server faults: each gives its typed error and leaves no process behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures.mcp_servers import CHANGING, EXIT_AT_ONCE, FLOOD, HANG_INIT, IGNORE_SIGTERM
from tests.tools_app.runtime.mcp.conftest import Specs, marked_pids, wait_no_marked
from tools_app.runtime.errors import (
    CommandNotExecutable,
    CommandNotFound,
    ConnectionFailed,
    ProtocolError,
    ServerExited,
    StartupTimeout,
)
from tools_app.runtime.mcp import SessionPool


def test_command_not_found_names_the_command(pool: SessionPool, specs: Specs) -> None:
    with pytest.raises(CommandNotFound) as info:
        pool.probe(specs.local(None, command="no-such-mcp-server-xyz"))
    assert info.value.code == "command_not_found" and info.value.details == {"command": "no-such-mcp-server-xyz"}
    result = pool.call(specs.local(None, command="/nonexistent/bin/server"), "x", {})
    assert result.error_code == "EXECUTION_ERROR" and result.meta["error_type"] == "command_not_found"
    assert "/nonexistent/bin/server" in (result.error or "")  # names the command


def test_non_executable_file(pool: SessionPool, specs: Specs, tmp_path: Path) -> None:
    script = tmp_path / "server.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o644)
    with pytest.raises(CommandNotExecutable) as info:
        pool.probe(specs.local(None, command=str(script)))
    assert info.value.code == "command_not_executable" and info.value.details == {"command": str(script)}


def test_server_exiting_at_once_reports_its_stderr(pool: SessionPool, specs: Specs) -> None:
    # ServerExited, not StartupTimeout: the exit was seen, not waited out.
    with pytest.raises(ServerExited) as info:
        pool.probe(specs.local(EXIT_AT_ONCE, env={"INVENTORY_API_KEY": "sk-live-123456"}))
    assert "status 3" in info.value.message and "missing INVENTORY_DB" in info.value.message
    assert "sk-live-123456" not in info.value.message and "********" in info.value.message


def test_no_initialize_reply_is_a_startup_timeout(pool: SessionPool, specs: Specs) -> None:
    with pytest.raises(StartupTimeout) as info:
        pool.probe(specs.local(HANG_INIT, startup_timeout_s=1))
    assert info.value.code == "startup_timeout" and info.value.result_code == "TIMEOUT"
    assert "within 1 s" in info.value.message  # the spec's startup timeout fired, not a default
    assert wait_no_marked(specs.marker) == []


def test_stdout_garbage_flood_is_a_protocol_error(pool: SessionPool, specs: Specs) -> None:
    with pytest.raises(ProtocolError) as info:
        pool.probe(specs.local(FLOOD, startup_timeout_s=5))
    assert info.value.code == "protocol_error" and "non-JSON-RPC" in info.value.message  # one code, several causes
    assert wait_no_marked(specs.marker) == []


def test_sigterm_ignoring_server_and_its_grandchild_are_killed(pool: SessionPool, specs: Specs) -> None:
    spec = specs.local(IGNORE_SIGTERM)
    assert pool.call(spec, "get_inventory", {"sku": "DEMO-001"}).data["quantity"] == 12
    assert len(marked_pids(specs.marker)) == 2  # the server and its grandchild
    pool.close(spec.tool_id)
    assert wait_no_marked(specs.marker) == []  # they ignore SIGTERM: only the SIGKILL after the grace ends them


def test_version_check(pool: SessionPool, specs: Specs, tmp_path: Path) -> None:
    assert pool.probe(specs.local(version_check=True)).server_name == "inventory-mini"
    broken = tmp_path / "broken-server"
    broken.write_text("#!/bin/sh\necho 'no such option' >&2\nexit 4\n")
    broken.chmod(0o755)
    with pytest.raises(ConnectionFailed) as info:
        pool.probe(specs.local(None, command=str(broken), version_check=True))
    assert info.value.code == "connection_failed" and "--version" in info.value.message  # one code, several causes


def test_malformed_tool_result(pool: SessionPool, specs: Specs, tmp_path: Path) -> None:
    spec = specs.local(CHANGING, env={"TOOLHUB_FIXTURE_STATE": str(tmp_path / "state")})
    result = pool.call(spec, "bad_result", {})
    assert result.error_code == "EXECUTION_ERROR" and result.meta["error_type"] == "malformed_result"
    assert pool.call(spec, "lookup", {"sku": "a"}).text == "lookup ok"  # the session survives


def test_changing_tool_list_is_paginated_and_rediscovered(pool: SessionPool, specs: Specs, tmp_path: Path) -> None:
    spec = specs.local(CHANGING, env={"TOOLHUB_FIXTURE_STATE": str(tmp_path / "state")})
    first = pool.probe(spec)  # one page per tool: exercises nextCursor
    assert [f.name for f in first.functions] == ["lookup", "bad_result"]
    second = pool.discover(spec)
    assert [f.name for f in second.functions] == ["lookup", "bad_result", "restock"]
    third = pool.discover(spec)
    hashes = [{f.name: f.schema_hash for f in d.functions} for d in (first, second, third)]
    assert hashes[0]["lookup"] == hashes[1]["lookup"] != hashes[2]["lookup"]
    assert hashes[0]["bad_result"] == hashes[2]["bad_result"]
    assert "warehouse" in {f.name: f for f in third.functions}["lookup"].input_schema["properties"]
