"""A stdio server that leaves server/discover unanswered is met with the 2025 handshake after a short probe (not
the SDK's 10 s discover timeout, longer than many startup timeouts), and the era each tool revision spoke is
remembered: its next connections go straight to the handshake."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.mcp_servers import SILENT_UNKNOWN
from tests.tools_app.runtime.mcp.conftest import Specs
from tools_app.runtime.mcp import connection

TOOL_ID = 9101


@pytest.fixture(autouse=True)
def _unknown_eras() -> Iterator[None]:
    for version in (1, 2):
        connection._stdio_eras.pop((TOOL_ID, version), None)
    yield
    for version in (1, 2):
        connection._stdio_eras.pop((TOOL_ID, version), None)


def _silent(specs: Specs, log: Path, version: int = 1) -> Any:
    # A startup timeout shorter than the SDK's discover timeout: waiting that out would fail the connection.
    return specs.local(SILENT_UNKNOWN, tool_id=TOOL_ID, version=version, startup_timeout_s=6,
                       args=[str(SILENT_UNKNOWN), "--log", str(log)])


def _methods(log: Path) -> list[str]:
    return log.read_text().split() if log.exists() else []


def test_a_server_silent_on_discover_is_met_with_the_handshake(make_pool: Any, specs: Specs, tmp_path: Path) -> None:
    log = tmp_path / "methods.log"
    pool = make_pool()
    found = pool.probe(_silent(specs, log))
    assert found.protocol_version == "2025-06-18" and [f.name for f in found.functions] == ["echo"]
    assert _methods(log)[:2] == ["server/discover", "initialize"]
    assert connection.stdio_era((TOOL_ID, 1)) is False


def test_the_era_is_remembered_per_tool_revision(make_pool: Any, specs: Specs, tmp_path: Path) -> None:
    log = tmp_path / "methods.log"
    pool = make_pool()
    pool.probe(_silent(specs, log))
    called = pool.call(_silent(specs, log), "echo", {"text": "hi"})  # a new, warm connection of the same revision
    assert called.success, called
    assert _methods(log).count("server/discover") == 1 and _methods(log).count("initialize") == 2
    pool.probe(_silent(specs, log, version=2))  # a new revision (its command or config changed) is probed again
    assert _methods(log).count("server/discover") == 2


def test_a_modern_stdio_server_is_still_reached_in_2026(make_pool: Any, specs: Specs) -> None:
    from tests.fixtures.mcp_servers import MODERN_ONLY

    connection._stdio_eras.pop((TOOL_ID + 1, 1), None)
    spec = specs.local(MODERN_ONLY, tool_id=TOOL_ID + 1)
    pool = make_pool()
    assert pool.probe(spec).protocol_version == "2026-07-28"
    assert connection.stdio_era((TOOL_ID + 1, 1)) is True
    assert pool.probe(spec).protocol_version == "2026-07-28"  # remembered modern: the SDK's policy, no short cut
