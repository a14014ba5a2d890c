"""DELETE and DISABLE end every process a LOCAL server started, a setsid'd SIGTERM-ignoring daemon included."""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.mcp_servers import SETSID_GRANDCHILD
from tests.waiting import wait_until
from tools_app.wiring.pool import pool
from tools_app.wiring.workspaces import workspace_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _close_pool() -> Any:
    # Before too: a session an earlier module left open would count in open_sessions here.
    pool().close_all()
    yield
    pool().close_all()


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")



def host_pid(marker: str, sandbox_pid: int) -> int | None:
    """The host pid of the process carrying `marker` in its environment whose pid in its sandbox is `sandbox_pid`
    (a sandboxed server has its own pid namespace: the pid it writes is not the host's)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if marker.encode() not in (entry / "environ").read_bytes():
                continue
            status = (entry / "status").read_text()
        except OSError:
            continue
        nspids = next((line.split()[1:] for line in status.splitlines() if line.startswith("NSpid:")), [])
        if nspids and int(nspids[-1]) == sandbox_pid:
            return int(nspids[0])
    return None


def start_server_with_daemon(api: Any, tenant: Any) -> tuple[int, int]:
    # The server runs in the tenant sandbox: the pid file goes in the workspace, the only place it can write.
    pidfile = workspace_for(tenant) / "daemon.pid"
    pidfile.unlink(missing_ok=True)
    marker = f"TOOLHUB_TEST_DAEMON={uuid.uuid4().hex}"
    resp = api.post("/api/v1/tools/", {"name": "stubborn", "type": "LOCAL", "config": {
        "command": sys.executable, "args": [str(SETSID_GRANDCHILD)],
        "env": {"TOOLHUB_FIXTURE_PIDFILE": str(pidfile), "TOOLHUB_TEST_DAEMON": marker.split("=")[1]},
        "startup_timeout_s": 20, "call_timeout_s": 10}},
        format="json")
    assert resp.status_code == 201, resp.content
    tool_id = int(resp.json()["id"])
    assert api.post(f"/api/v1/tools/{tool_id}/refresh/").json()["ok"]
    invoked = api.post(f"/api/v1/tools/{tool_id}/invoke/", {"function": "get_inventory",
                                                             "arguments": {"sku": "DEMO-001"}}, format="json")
    assert invoked.status_code == 200 and invoked.json()["success"], invoked.content
    assert wait_until(pidfile.exists), "the fixture's daemon never wrote its pid"
    daemon = host_pid(marker, int(pidfile.read_text()))
    assert daemon is not None and alive(daemon) and os.getsid(daemon) != os.getsid(0)  # no group kill reaches it
    return tool_id, daemon


def test_delete_ends_a_setsid_daemon_that_ignores_sigterm(api: Any, tenant: Any) -> None:
    tool_id, daemon = start_server_with_daemon(api, tenant)
    assert api.delete(f"/api/v1/tools/{tool_id}/").status_code == 204
    assert wait_until(lambda: not alive(daemon)), f"daemon {daemon} outlived DELETE"
    assert pool().stats()["open_sessions"] == 0


def test_disable_closes_the_pooled_session_at_once_and_ends_the_daemon(api: Any, tenant: Any) -> None:
    tool_id, daemon = start_server_with_daemon(api, tenant)
    assert pool().stats()["open_sessions"] == 1
    resp = api.put(f"/api/v1/tools/{tool_id}/status/", {"status": "DISABLED"}, format="json")
    assert resp.status_code == 200, resp.content
    # Closed on commit, not at the idle TTL (300 s by default).
    assert pool().stats()["open_sessions"] == 0
    assert wait_until(lambda: not alive(daemon)), f"daemon {daemon} outlived DISABLE"
