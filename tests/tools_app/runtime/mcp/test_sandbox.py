"""LOCAL servers in the tenant sandbox: a hostile server sees nothing of Toolhub, of other tenants or the network."""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.mcp_servers import ESCAPE_PROBE, HERE, MINI, PYTHON
from tests.tools_app.runtime.mcp.conftest import MARKER_ENV, Specs
from tools_app.configs import server_spec as spec_from_config
from tools_app.runtime.cgroups import cgroup_root
from tools_app.runtime.mcp import ServerSpec, SessionPool
from tools_app.runtime.sandbox import SandboxPolicy, ServerSandbox

REPO = Path(__file__).resolve().parents[4]
pytestmark = pytest.mark.skipif(
    not os.access(SandboxPolicy().bwrap, os.X_OK), reason="bubblewrap not installed (apt-get install bubblewrap)"
)


def sandbox_for(tmp_path: Path, tenant: int, memory_bytes: int = 0, **overrides: Any) -> ServerSandbox:
    workspace = tmp_path / f"tenant.{tenant}"
    workspace.mkdir(exist_ok=True)
    policy = SandboxPolicy(extra_ro_paths=(sys.base_prefix, sys.prefix, str(HERE)), tenant_memory_bytes=memory_bytes)
    fields: dict[str, Any] = {"policy": policy, "tenant_key": str(tenant), "workspace": str(workspace),
                              "uid": 100000 + tenant}
    fields.update(overrides)
    return ServerSandbox(**fields)


def sandboxed(specs: Specs, sandbox: ServerSandbox, script: Path = ESCAPE_PROBE, *, tool_id: int = 1,
              **config: Any) -> ServerSpec:
    cfg: dict[str, Any] = {"command": PYTHON, "args": [str(script)], "env": {MARKER_ENV: specs.marker},
                           "startup_timeout_s": 20, "call_timeout_s": 20, **config}
    return spec_from_config(tool_id=tool_id, config_version=1, tenant_key=sandbox.tenant_key, tool_type="LOCAL",
                            config=cfg, sandbox=sandbox)


def call(pool: SessionPool, spec: ServerSpec, function: str, arguments: dict[str, Any] | None = None) -> Any:
    result = pool.call(spec, function, arguments or {})
    assert result.success, (result.error_code, result.error)
    return result.data if result.data is not None else json.loads(result.text)


def test_the_server_runs_as_the_tenants_uid_in_its_workspace_seeing_only_its_own_processes(
        pool: SessionPool, specs: Specs, tmp_path: Path) -> None:
    box = sandbox_for(tmp_path, 7)
    me = call(pool, sandboxed(specs, box), "whoami")
    assert me["uid"] == 100007 and me["gid"] == 100007
    assert me["cwd"] == os.path.realpath(box.workspace)
    assert os.getpid() not in me["visible_pids"] and max(me["visible_pids"]) < 50, me["visible_pids"]
    assert me["ppid"] in (0, 1) or me["ppid"] in me["visible_pids"]


def test_no_process_it_can_see_carries_toolhubs_environment(
        pool: SessionPool, specs: Specs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # What the attack read: /proc/$PPID/environ held the database URL and the Fernet keys.
    monkeypatch.setenv("TOOLHUB_SECRET_KEYS", "canary-fernet-key-do-not-leak")
    monkeypatch.setenv("DATABASE_URL", "postgres://canary-user:canary-pass@db/x")
    seen = call(pool, sandboxed(specs, box := sandbox_for(tmp_path, 7)), "environs")
    assert seen, "the probe saw no process at all"
    dump = json.dumps(seen)
    assert "canary" not in dump
    assert str(box.workspace) and "TOOLHUB_SECRET_KEYS" not in dump and "DATABASE_URL" not in dump


def test_toolhubs_files_and_another_tenants_workspace_are_out_of_reach(
        pool: SessionPool, specs: Specs, tmp_path: Path) -> None:
    mine, theirs = sandbox_for(tmp_path, 7), sandbox_for(tmp_path, 8)
    (Path(theirs.workspace) / "secret.txt").write_text("tenant 8's file")
    spec = sandboxed(specs, mine)
    for path in (REPO / "config" / "settings" / "base.py", REPO / "manage.py", Path("/etc/shadow"),
                 Path(theirs.workspace) / "secret.txt", Path("/root/.bash_history")):
        got = call(pool, spec, "read", {"path": str(path)})
        assert got["ok"] is False, (path, got)
    assert call(pool, spec, "listdir", {"path": theirs.workspace})["ok"] is False
    assert call(pool, spec, "write", {"path": str(Path(theirs.workspace) / "planted.txt")})["ok"] is False
    assert not (Path(theirs.workspace) / "planted.txt").exists()
    # The repository shows only what is mounted from it (the fixture servers), never its settings or var/.
    listed = call(pool, spec, "listdir", {"path": str(REPO)})
    assert listed["ok"] is False or set(listed["value"]) <= {"tests", Path(sys.prefix).name}, listed
    # Its own workspace is writable and is the tenant's real folder.
    assert call(pool, spec, "write", {"path": "note.txt"})["ok"] is True
    assert (Path(mine.workspace) / "note.txt").read_text() == "escaped"
    # System folders are there, read-only.
    assert call(pool, spec, "read", {"path": "/etc/passwd"})["ok"] is True
    assert call(pool, spec, "write", {"path": "/usr/planted"})["ok"] is False


def test_no_network_unless_the_tenant_policy_grants_it(pool: SessionPool, specs: Specs, tmp_path: Path) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    port = listener.getsockname()[1]
    try:
        closed = call(pool, sandboxed(specs, sandbox_for(tmp_path, 7)), "connect", {"host": "127.0.0.1", "port": port})
        assert closed["ok"] is False, closed
        granted = sandboxed(specs, sandbox_for(tmp_path, 9, share_net=True), tool_id=2)
        assert call(pool, granted, "connect", {"host": "127.0.0.1", "port": port})["ok"] is True
    finally:
        listener.close()


def test_cwd_outside_the_workspace_is_refused_before_anything_runs(
        pool: SessionPool, specs: Specs, tmp_path: Path) -> None:
    box = sandbox_for(tmp_path, 7)
    sandbox_for(tmp_path, 8)
    for cwd in (str(tmp_path / "tenant.8"), "../tenant.8", "/"):
        result = pool.call(sandboxed(specs, box, cwd=cwd), "whoami", {})
        assert not result.success and result.error_code == "INVALID_PARAMS", (cwd, result.error)
        assert "outside the tenant workspace" in (result.error or "")
    (Path(box.workspace) / "sub").mkdir()
    assert call(pool, sandboxed(specs, box, cwd="sub", tool_id=3), "whoami")["cwd"].endswith("/tenant.7/sub")


def test_a_command_the_sandbox_cannot_see_is_refused(pool: SessionPool, specs: Specs, tmp_path: Path) -> None:
    hidden = tmp_path / "elsewhere.sh"
    hidden.write_text("#!/bin/sh\nexit 0\n")
    hidden.chmod(0o755)
    result = pool.call(sandboxed(specs, sandbox_for(tmp_path, 7), script=MINI, command=str(hidden)), "whoami", {})
    assert not result.success and result.error_code == "INVALID_PARAMS", result
    assert result.meta["error_type"] == "sandbox_path_refused"  # the runtime error's code


@pytest.mark.skipif(cgroup_root(None) is None, reason="no writable cgroup for a per-tenant memory cap on this host")
def test_a_tenants_servers_share_one_memory_cap(pool: SessionPool, specs: Specs, tmp_path: Path) -> None:
    box = sandbox_for(tmp_path, 7, memory_bytes=300 << 20)
    first, second = sandboxed(specs, box, tool_id=1), sandboxed(specs, box, tool_id=2)
    assert call(pool, first, "hold", {"mib": 180})["ok"] is True
    # Each fits alone; together they pass the tenant's cap, so the kernel stops one of them (the larger).
    pool.call(second, "hold", {"mib": 180})
    holding = []
    for spec in (first, second):
        result = pool.call(spec, "held", {})  # a stopped server is started again and holds nothing
        holding.append(int(json.loads(result.text)) if result.success else 0)
    assert sorted(holding) in ([0, 180], [0, 0]), holding
    # Another tenant's cap is its own.
    other = sandboxed(specs, sandbox_for(tmp_path, 8, memory_bytes=300 << 20), tool_id=3)
    assert call(pool, other, "hold", {"mib": 180})["ok"] is True


def test_stopping_the_pool_ends_every_sandboxed_process(make_pool: Any, specs: Specs, tmp_path: Path) -> None:
    pool = make_pool(idle_ttl_s=300)
    call(pool, sandboxed(specs, sandbox_for(tmp_path, 7)), "whoami")
    # make_pool's teardown asserts that no process carrying this test's marker is left.
