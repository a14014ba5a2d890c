"""DELETE and DISABLE end every process a LOCAL server started, a setsid'd SIGTERM-ignoring daemon included."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.mcp_servers import SETSID_GRANDCHILD
from tools_app import adapters

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _close_pool() -> Any:
    yield
    adapters.pool().close_all()


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def wait_until(check: Any, bound_s: float = 15.0) -> bool:
    """Poll `check` until true or the (generous) bound passes; the bound is a hang guard, not a timing claim."""
    deadline = time.monotonic() + bound_s
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def start_server_with_daemon(api: Any, tmp_path: Path) -> tuple[int, int]:
    pidfile = tmp_path / "daemon.pid"
    resp = api.post("/api/v1/tools/", {"name": "stubborn", "type": "LOCAL", "config": {
        "command": sys.executable, "args": [str(SETSID_GRANDCHILD)],
        "env": {"TOOLHUB_FIXTURE_PIDFILE": str(pidfile)}, "startup_timeout_s": 20, "call_timeout_s": 10}},
        format="json")
    assert resp.status_code == 201, resp.content
    tool_id = int(resp.json()["id"])
    assert api.post(f"/api/v1/tools/{tool_id}/refresh/").json()["ok"]
    invoked = api.post(f"/api/v1/tools/{tool_id}/invoke/", {"function": "get_inventory",
                                                             "arguments": {"sku": "DEMO-001"}}, format="json")
    assert invoked.status_code == 200 and invoked.json()["success"], invoked.content
    assert wait_until(pidfile.exists), "the fixture's daemon never wrote its pid"
    daemon = int(pidfile.read_text())
    assert alive(daemon) and os.getsid(daemon) != os.getsid(0)  # its own session: no group kill reaches it
    return tool_id, daemon


def test_delete_ends_a_setsid_daemon_that_ignores_sigterm(api: Any, tmp_path: Path) -> None:
    tool_id, daemon = start_server_with_daemon(api, tmp_path)
    assert api.delete(f"/api/v1/tools/{tool_id}/").status_code == 204
    assert wait_until(lambda: not alive(daemon)), f"daemon {daemon} outlived DELETE"
    assert adapters.pool().stats()["open_sessions"] == 0


def test_disable_closes_the_pooled_session_at_once_and_ends_the_daemon(api: Any, tmp_path: Path) -> None:
    tool_id, daemon = start_server_with_daemon(api, tmp_path)
    assert adapters.pool().stats()["open_sessions"] == 1
    resp = api.put(f"/api/v1/tools/{tool_id}/status/", {"status": "DISABLED"}, format="json")
    assert resp.status_code == 200, resp.content
    # Closed on commit, not at the idle TTL (300 s by default).
    assert adapters.pool().stats()["open_sessions"] == 0
    assert wait_until(lambda: not alive(daemon)), f"daemon {daemon} outlived DISABLE"
