"""Stopping a LOCAL server ends its whole process tree: a probe (Test), a pool close and close_all."""

from __future__ import annotations

from pathlib import Path

from tests.fixtures.mcp_servers import SETSID_GRANDCHILD
from tests.tools_app.runtime.mcp.conftest import Specs, marked_pids, wait_no_marked
from tools_app.runtime.mcp import SessionPool


def test_probe_ends_a_setsid_daemon(pool: SessionPool, specs: Specs, tmp_path: Path) -> None:
    spec = specs.local(SETSID_GRANDCHILD, env={"TOOLHUB_FIXTURE_PIDFILE": str(tmp_path / "pid")})
    assert pool.probe(spec).server_name == "inventory-mini"
    assert (tmp_path / "pid").exists()  # the daemon started before the server answered
    assert wait_no_marked(specs.marker) == []


def test_close_all_ends_a_setsid_daemon(pool: SessionPool, specs: Specs, tmp_path: Path) -> None:
    spec = specs.local(SETSID_GRANDCHILD, env={"TOOLHUB_FIXTURE_PIDFILE": str(tmp_path / "pid")})
    assert pool.call(spec, "get_inventory", {"sku": "DEMO-001"}).success
    assert len(marked_pids(specs.marker)) == 2  # the server and the daemon (its parent already exited)
    pool.close_all()
    assert wait_no_marked(specs.marker) == []
