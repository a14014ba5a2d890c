"""The runner tier with real runner processes (`manage.py toolhub_runner`) and Redis: one LOCAL server per key in
the whole deployment, whichever web process calls; a dead or draining runner's servers start again elsewhere."""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

import httpx2
import pytest
import redis

from core.outbound import OutboundPolicy
from tests import loopback
from tests.fixtures.mcp_servers import COUNTER, HERE, MINI, free_port
from tests.waiting import PROCESS_BOUND_S, scaled, wait_until
from tools_app.configs import server_spec
from tools_app.runtime.mcp import ServerSpec, SessionPool
from tools_app.runtime.mcp.spec import LocalSpec
from tools_app.runtime.runner.client import RunnerPool
from tools_app.runtime.runner.placement import DRAIN_SUFFIX, PREFIX, Registry, RunnerInfo, owner
from tools_app.runtime.sandbox import SandboxPolicy, SandboxUnavailable, ServerSandbox

REPO = Path(__file__).resolve().parents[2]
SECRET = "runner-test-secret"
# A database of their own, not the cache's (REDIS_URL, in CI's second pass): each test starts with the cache cleared,
# which would empty the announcements of the runners the tests of a class share.
REDIS_URL = os.environ.get("TOOLHUB_TEST_RUNNER_REDIS_URL") or "redis://127.0.0.1:6379/13"
# Time set, not widened: a runner's announcement lives 30 s, so a runner starved for many seconds on a loaded machine
# still counts as live (a lapsed one sent a web process to the other runner, and two servers counted from 1), and it
# renews it every 0.5 s, so a test waiting for its next heartbeat waits half a second. A killed runner is noticed by
# its refused connection, not by its announcement expiring: no test waits for the TTL.
RUNNER_TTL_S = 30
RUNNER_HEARTBEAT_S = 0.5
# A server placed on a runner while its key's owner was away is closed once unused this long (its floor: two
# heartbeats): the test of that waits a second for it, not the default 5 s.
RUNNER_UNOWNED_IDLE_S = 1


def _redis_up() -> bool:
    try:
        return bool(redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1).ping())
    except redis.RedisError:
        return False


# The runners announce themselves in one Redis database each test flushes: these tests stay in this one module, which
# one xdist worker runs whole (`--dist loadfile`).
pytestmark = [
    pytest.mark.skipif(not _redis_up(), reason=f"the runner tier needs Redis ({REDIS_URL} did not answer)"),
    pytest.mark.skipif(not os.access(SandboxPolicy().bwrap, os.X_OK), reason="bubblewrap not installed"),
]


_tool_ids = itertools.count(100)


class Runners:
    """Real runner processes announcing themselves in the Redis database these tests flush."""

    def __init__(self, tmp_path: Path) -> None:
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.registry = Registry(REDIS_URL, ttl_s=RUNNER_TTL_S, secret=SECRET)
        self.tmp_path = tmp_path
        self.used: set[int] = set()
        self.paused: set[str] = set()  # runners `pause` stopped (a test that failed before it resumed them)
        self.settings: dict[str, dict[str, str]] = {}  # each runner's own settings: a restart keeps them

    def tool_id(self, on: str = "", live: tuple[str, ...] = ("r1", "r2"), version: int = 1) -> int:
        """A tool id no other test used (a server key is the tool id and config version): its server starts
        afresh whatever ran on the runners before. With `on`, one whose key the placement gives to runner `on`
        while `live` are the live runners (a test about one runner's own settings picks the runner so)."""
        tool_id = next(_tool_ids)
        if on:
            infos = [RunnerInfo(id=runner_id, url="") for runner_id in live]
            while (found := owner(f"{tool_id}:{version}", infos)) is None or found.id != on:
                tool_id = next(_tool_ids)
        self.used.add(tool_id)
        return tool_id

    def start(self, *runner_ids: str, **settings: str) -> None:
        """Start runners with one set of settings (see `start_each`)."""
        self.start_each({runner_id: settings for runner_id in runner_ids})

    def start_each(self, settings_of: dict[str, dict[str, str]]) -> None:
        """Start runners, each with its own settings (together: their Django start-ups overlap), and wait until
        each has announced itself."""
        for runner_id, settings in settings_of.items():
            env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.test", "TOOLHUB_RUNNERS": "redis",
                   "REDIS_URL": REDIS_URL, "TOOLHUB_RUNNER_SECRET": SECRET,
                   "TOOLHUB_RUNNER_TTL_S": str(RUNNER_TTL_S), "TOOLHUB_RUNNER_HEARTBEAT_S": str(RUNNER_HEARTBEAT_S),
                   "TOOLHUB_RUNNER_UNOWNED_IDLE_S": str(RUNNER_UNOWNED_IDLE_S), **settings}
            self.settings[runner_id] = settings
            # Its output to a file: a pipe nobody reads fills up (its servers' logs pass through it) and blocks the
            # runner, heartbeat and all, once it has lived a few tests.
            with open(self.tmp_path / f"{runner_id}.log", "ab") as log:
                self.procs[runner_id] = subprocess.Popen(
                    [sys.executable, "manage.py", "toolhub_runner", "--port", str(free_port()), "--id", runner_id],
                    cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        for runner_id in settings_of:
            assert wait_until(partial(self.announced, runner_id), PROCESS_BOUND_S), \
                f"runner {runner_id} never announced itself: {self.log_tail(runner_id)}"

    def announced(self, runner_id: str) -> bool:
        return runner_id in self.in_redis()

    @staticmethod
    def in_redis() -> dict[str, RunnerInfo]:
        """The runners announced in Redis now, read by a registry that remembers nothing: `self.registry` keeps what
        it verified before until its signed expiry, so after a flush it still lists runners a fresh web process
        cannot find until their next heartbeat (CI's second pass once failed on exactly that)."""
        fresh = Registry(REDIS_URL, ttl_s=RUNNER_TTL_S, secret=SECRET)
        try:
            return {r.id: r for r in fresh.runners(max_age_s=0)}
        finally:
            fresh.redis.close()

    def log_tail(self, runner_id: str) -> str:
        return (self.tmp_path / f"{runner_id}.log").read_text(errors="replace")[-2000:]

    def kill(self, runner_id: str) -> None:
        os.killpg(self.procs[runner_id].pid, signal.SIGKILL)
        self.procs[runner_id].wait(10)

    def pause(self, runner_id: str) -> None:
        """Stop a runner's process where it is (SIGSTOP: its heartbeat stops, it answers nothing) until `resume`,
        once each of its threads has stopped (no announcement of it is still on its way)."""
        pid = self.procs[runner_id].pid
        os.killpg(pid, signal.SIGSTOP)
        self.paused.add(runner_id)

        def stopped() -> bool:
            return all((task / "stat").read_text().rsplit(")", 1)[1].split()[0] == "T"
                       for task in Path(f"/proc/{pid}/task").iterdir())

        assert wait_until(stopped), f"runner {runner_id} did not stop"

    def resume(self, runner_id: str) -> None:
        self.paused.discard(runner_id)
        if self.procs[runner_id].poll() is None:
            os.killpg(self.procs[runner_id].pid, signal.SIGCONT)

    def stop_all(self) -> None:
        for runner_id in list(self.paused):
            self.resume(runner_id)
        for proc in self.procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(20)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)

    def restore(self, *runner_ids: str) -> None:
        """Each of `runner_ids` live and not draining again: one a test killed is started anew; one a test drained
        loses its draining mark, and its next heartbeat (every RUNNER_HEARTBEAT_S) announces it not draining (a
        runner reads its mark on each beat: a drain is no state of the process, so no restart is needed)."""
        for runner_id in list(self.paused):
            self.resume(runner_id)
        alive = {i for i in runner_ids if i in self.procs and self.procs[i].poll() is None}
        # A running runner is announced again by its next heartbeat: the Redis database may just have been emptied
        # (with REDIS_URL set, the cache is in it, and each test starts with the cache cleared).
        wait_until(lambda: alive <= set(self.in_redis()))
        self._undrain(alive)
        live = self.in_redis()
        gone = [i for i in runner_ids if i not in alive or i not in live or live[i].draining]
        if gone:
            self._start_again(gone, alive)

    def _undrain(self, alive: set[str]) -> None:
        """The draining marks of live runners deleted, and their next heartbeats seen announcing them not draining."""
        drained = [i for i, info in self.in_redis().items() if i in alive and info.draining]
        if drained:
            self.registry.redis.delete(*(f"{PREFIX}{i}{DRAIN_SUFFIX}" for i in drained))
            wait_until(lambda: not any(info.draining for i, info in self.in_redis().items() if i in drained))

    def _start_again(self, gone: list[str], alive: set[str]) -> None:
        for runner_id in gone:
            if runner_id in alive:
                self.kill(runner_id)
            self.registry.withdraw(runner_id)
        self.start_each({runner_id: self.settings.get(runner_id, {}) for runner_id in gone})

    def close_used(self) -> None:
        """Close the servers of the tool ids handed out since the last close, on every live runner."""
        used, self.used = self.used, set()
        with loopback.client(headers={"Authorization": f"Bearer {SECRET}"}, trust_env=False) as closing:
            for runner in Registry(REDIS_URL, ttl_s=RUNNER_TTL_S, secret=SECRET).runners(max_age_s=0):
                for tool_id in used:
                    try:
                        closing.post(runner.url + "/v1/close", json={"tool_id": tool_id}, timeout=scaled(30))
                    except httpx2.HTTPError:
                        continue


@pytest.fixture
def runners(tmp_path: Path) -> Iterator[Runners]:
    """Runners of this test's own, none running before it (for tests that need particular runner settings, or none)."""
    redis.Redis.from_url(REDIS_URL).flushdb()
    started = Runners(tmp_path)
    yield started
    started.stop_all()


# The own settings of runner r2, for the tests about a runner's own settings (a server without sandbox allowed, slot
# limits): r1 keeps the defaults. Both runners in one tier, one Django process start each (seconds of CPU) for the
# whole class, not a third runner for those tests: allowing a server without sandbox changes nothing for sandboxed
# servers, and the slot limits leave each test's one or two servers room; a test about one runner's settings picks
# tool ids the placement gives to that runner (`Runners.tool_id(on=...)`).
OWN = "r2"
OWN_SETTINGS = {"TOOLHUB_RUNNER_ALLOW_UNSANDBOXED": "on", "TOOLHUB_POOL_MAX_TOTAL": "4",
                "TOOLHUB_POOL_MAX_PER_TENANT": "10"}


@pytest.fixture(scope="class")
def _tier(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runners]:
    redis.Redis.from_url(REDIS_URL).flushdb()
    tier = Runners(tmp_path_factory.mktemp("tier"))
    tier.start_each({"r1": {}, OWN: OWN_SETTINGS})
    yield tier
    tier.stop_all()
    redis.Redis.from_url(REDIS_URL).flushdb()


@pytest.fixture
def tier(_tier: Runners) -> Iterator[Runners]:
    """Two runners, r1 with the default settings and r2 with OWN_SETTINGS, shared by the tests of one class: each
    test finds both live and not draining (one an earlier test killed or drained starts again, with its own
    settings), uses tool ids no other test uses (a server key is the tool id and config version), and its servers
    are closed when it ends (no slot of one test held into the next)."""
    _tier.restore("r1", "r2")
    yield _tier
    _tier.close_used()


@pytest.fixture
def web() -> Iterator[list[RunnerPool]]:
    """Two 'web processes': each its own pool facade and registry reader, as two workers would have."""
    pools = [RunnerPool(SessionPool(policy=OutboundPolicy.build("")), Registry(REDIS_URL, ttl_s=RUNNER_TTL_S, secret=SECRET), SECRET)
             for _ in range(2)]
    yield pools
    for pool in pools:
        pool.shutdown()


def counter_spec(tmp_path: Path, marker: str, *, version: int = 1, sandboxed: bool = True,
                 tool_id: int = 41) -> ServerSpec:
    workspace = tmp_path / "tenant.1"
    workspace.mkdir(exist_ok=True)
    box = ServerSandbox(policy=SandboxPolicy(extra_ro_paths=(sys.base_prefix, sys.prefix, str(HERE))),
                        tenant_key="1", workspace=str(workspace), uid=100001)
    config = {"command": sys.executable, "args": [str(COUNTER)], "env": {"TOOLHUB_TEST_MARKER": marker},
              "startup_timeout_s": 20}
    return server_spec(tool_id=tool_id, config_version=version, tenant_key="1", tool_type="LOCAL", config=config,
                       sandbox=box if sandboxed else None)


def mini_spec(tmp_path: Path, marker: str, *, tool_id: int, tenant: str) -> ServerSpec:
    workspace = tmp_path / f"tenant.{tenant}"
    workspace.mkdir(exist_ok=True)
    box = ServerSandbox(policy=SandboxPolicy(extra_ro_paths=(sys.base_prefix, sys.prefix, str(HERE))),
                        tenant_key=tenant, workspace=str(workspace), uid=100000 + int(tenant))
    config = {"command": sys.executable, "args": [str(MINI)], "env": {"TOOLHUB_TEST_MARKER": marker},
              "startup_timeout_s": 20}
    return server_spec(tool_id=tool_id, config_version=1, tenant_key=tenant, tool_type="LOCAL", config=config,
                       sandbox=box)


def marked(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if f"TOOLHUB_TEST_MARKER={marker}".encode() in (entry / "environ").read_bytes() \
                        and (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def servers(marker: str) -> list[int]:
    """The marked MCP server processes themselves (not their bwrap), skipping any that ended meanwhile."""
    found = []
    for pid in marked(marker):
        try:
            if "bwrap" not in Path(f"/proc/{pid}/cmdline").read_text():
                found.append(pid)
        except OSError:
            continue
    return found


def count(pool: RunnerPool, spec: ServerSpec) -> dict[str, int]:
    result = pool.call(spec, "count", {})
    assert result.success, (result.error_code, result.error)
    return dict(json.loads(result.text)) if result.data is None else dict(result.data)


def unread_requests(port: int) -> int:
    """TCP connections to 127.0.0.1:`port` holding received data their owner has not read (the rx queue)."""
    found = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            cols = line.split()
            if int(cols[1].rsplit(":", 1)[1], 16) == port and int(cols[4].split(":")[1], 16) > 0:
                found += 1
    return found


class Catcher:
    """A listener on 127.0.0.1 standing in for an attacker's server: it records every connection made to it."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.received: list[bytes] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                try:
                    self.received.append(conn.recv(65536))
                    conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}")
                except OSError:
                    continue

    def close(self) -> None:
        self.sock.close()


class TestOnOneTier:
    """Tests on the shared pair of runners (`tier`: r1 default, r2 with OWN_SETTINGS)."""

    def test_one_server_one_state_whichever_web_process_calls(self, tier: Runners, web: list[RunnerPool],
                                                              tmp_path: Path) -> None:
        marker = uuid.uuid4().hex
        spec = counter_spec(tmp_path, marker, tool_id=tier.tool_id())
        answers = [count(web[i % 2], spec) for i in range(12)]
        assert [a["count"] for a in answers] == list(range(1, 13)), answers  # one state, not one per process
        assert len([p for p in marked(marker) if "bwrap" not in Path(f"/proc/{p}/cmdline").read_text()]) == 1
        # The web processes started nothing themselves.
        assert all(pool.local.stats()["processes_spawned"] == 0 for pool in web)

    def test_close_ends_the_server_on_its_runner_and_drain_moves_it(self, tier: Runners, web: list[RunnerPool],
                                                                    tmp_path: Path) -> None:
        marker = uuid.uuid4().hex
        spec = counter_spec(tmp_path, marker, tool_id=tier.tool_id())
        count(web[0], spec)
        assert marked(marker)
        web[1].close(spec.tool_id)  # a disable or config change made through the other web process
        assert wait_until(lambda: marked(marker) == []), "close did not end the server on its runner"

        owner = web[0].owner_of(spec).id
        assert web[0].registry.set_draining(owner)
        web[0].registry.forget()
        assert wait_until(lambda: web[0].owner_of(spec).id != owner)
        assert count(web[0], spec)["count"] == 1

    def test_a_runner_answers_only_with_the_secret(self, tier: Runners, web: list[RunnerPool],
                                                   tmp_path: Path) -> None:
        url = web[0].registry.runners(max_age_s=0)[0].url
        marker = uuid.uuid4().hex
        spec = counter_spec(tmp_path, marker, tool_id=tier.tool_id())
        from tools_app.runtime.runner.wire import spec_to_json

        body = {"spec": spec_to_json(spec), "function": "count", "arguments": {}}
        for headers in ({}, {"Authorization": "Bearer wrong"}):
            refused = loopback.post(url + "/v1/call", json=body, headers=headers, timeout=10)
            assert refused.status_code == 401
        assert marked(marker) == []  # no server started for the refused calls

    def test_a_forged_announcement_and_draining_mark_do_not_move_a_call(self, tier: Runners, web: list[RunnerPool],
                                                                        tmp_path: Path,
                                                                        caplog: pytest.LogCaptureFixture) -> None:
        """What a tenant on the host's network did with a Redis it could reach: mark the real runner that owns the
        server draining and announce its own address. The next LOCAL call still goes to the real runner; nothing
        reaches the forged one."""
        marker = uuid.uuid4().hex
        spec = counter_spec(tmp_path, marker, tool_id=tier.tool_id())
        assert count(web[0], spec)["count"] == 1
        real_id = web[0].owner_of(spec).id
        key = f"toolhub:runner:{real_id}"
        catcher = Catcher()
        attacker = redis.Redis.from_url(REDIS_URL)
        assert wait_until(lambda: attacker.get(key) is not None)
        real = json.loads(attacker.get(key) or b"{}")
        forged = {"id": "r0-evil", "url": catcher.url, "draining": False, "servers": 0, "since": time.time()}
        # The layout before signing, the signed layout with a made-up signature, and the real runner's entry replayed
        # with draining set and a new URL: none is signed with the secret.
        attacker.set("toolhub:runner:r0-evil", json.dumps(forged))
        attacker.set("toolhub:runner:r0-evil2", json.dumps({"info": {**forged, "id": "r0-evil2"},
                                                             "expires": time.time() + 600, "sig": "0" * 64}))
        replay = json.dumps({**real, "info": {**real["info"], "draining": True, "url": catcher.url}})
        attacker.set(key, replay)
        attacker.set(f"{key}:drain", "1")

        def fresh() -> dict[str, Any]:
            return {r.id: r for r in Registry(REDIS_URL, ttl_s=RUNNER_TTL_S, secret=SECRET).runners(max_age_s=0)}

        try:
            with caplog.at_level(logging.WARNING, logger="toolhub.runner"):
                web[0].registry.forget()
                assert count(web[0], spec)["count"] == 2  # the same server, on the real runner
                assert [r.id for r in web[0].registry.runners(max_age_s=0)] == ["r1", "r2"]
                # The runner's next heartbeat read the forged draining mark and did not drain.
                assert wait_until(lambda: real_id in fresh())
                assert not fresh()[real_id].draining
                assert count(web[1], spec)["count"] == 3  # another web process, reading Redis afresh
                web[1].close(spec.tool_id)  # close goes to every live runner: only verified ones
            def logged() -> str:
                return " ".join(r.getMessage() for r in caplog.records)

            def replay_read_and_refused() -> bool:
                """The real runner's next heartbeat (every 0.5 s) rewrites its key, on a loaded machine maybe before
                any read met the replay: replayed again until a read has, it is refused like the forged ones."""
                attacker.set(key, replay)
                with caplog.at_level(logging.WARNING, logger="toolhub.runner"):
                    web[0].registry.forget()
                    web[0].registry.runners(max_age_s=0)
                return key in logged()

            assert wait_until(replay_read_and_refused)
            assert catcher.received == []
            assert web[0].registry.rejected >= 3
            assert web[0].stats()["runner_announcements_rejected"] == web[0].registry.rejected
            assert "toolhub:runner:r0-evil" in logged() and "toolhub:runner:r0-evil2" in logged()
        finally:
            catcher.close()
            attacker.delete("toolhub:runner:r0-evil", "toolhub:runner:r0-evil2", f"{key}:drain")

    def test_a_runner_runs_a_server_from_the_package_store_it_shares_and_names_one_it_does_not_see(
            self, tier: Runners, web: list[RunnerPool], tmp_path: Path) -> None:
        """LOCAL servers of packages run from the store the web process resolved: a runner that sees the store (the
        same path) starts the server from it, read-only; one that does not says so, naming the setting, before
        anything runs."""
        from tools_app.runtime.packages.errors import PackageStoreUnavailable
        from tools_app.runtime.packages.store import MARKER, _read_only, remove

        installed = tmp_path / "store" / "pypi" / "counter" / "1.0"  # an installed package's folder, as in the store
        installed.mkdir(parents=True)
        (installed / "counter.py").write_text(COUNTER.read_text())
        (installed / "stdio_core.py").write_text((COUNTER.parent / "stdio_core.py").read_text())  # its import
        (installed / MARKER).write_text(json.dumps({"manager": "pypi", "name": "counter", "version": "1.0"}))
        _read_only(installed)
        try:
            marker = uuid.uuid4().hex
            base = counter_spec(tmp_path, marker, tool_id=tier.tool_id())
            assert isinstance(base.target, LocalSpec) and base.target.sandbox is not None
            box = base.target.sandbox
            from_store = dataclasses.replace(base.target, args=(str(installed / "counter.py"),),
                                             sandbox=dataclasses.replace(box, policy=dataclasses.replace(
                                                 box.policy, store_paths=(str(installed),))))
            assert count(web[0], dataclasses.replace(base, target=from_store))["count"] == 1

            missing = str(tmp_path / "elsewhere" / "pypi" / "counter" / "1.0")
            unseen = dataclasses.replace(from_store, sandbox=dataclasses.replace(
                box, policy=dataclasses.replace(box.policy, store_paths=(missing,))))
            other = uuid.uuid4().hex
            with pytest.raises(PackageStoreUnavailable) as refused:
                web[1].probe(dataclasses.replace(
                    counter_spec(tmp_path, other, version=2, tool_id=base.tool_id),
                    target=dataclasses.replace(unseen, env=(("TOOLHUB_TEST_MARKER", other),))))
            assert missing in refused.value.message and "TOOLHUB_PACKAGE_STORE" in refused.value.message
            assert refused.value.code == "package_store_unavailable" and marked(other) == []
        finally:
            remove(installed)

    def test_a_runner_refuses_a_server_without_sandbox_unless_its_own_settings_allow_it(
            self, tier: Runners, web: list[RunnerPool], tmp_path: Path) -> None:
        """A default runner (r1) refuses it before anything runs (the test below runs one on r2, whose own settings
        allow it: a web process cannot ask for less than the runner's settings)."""
        marker = uuid.uuid4().hex
        spec = counter_spec(tmp_path, marker, sandboxed=False, tool_id=tier.tool_id(on="r1"))
        with pytest.raises(SandboxUnavailable) as refused:
            web[0].probe(spec)
        assert "TOOLHUB_RUNNER_ALLOW_UNSANDBOXED" in refused.value.message
        assert marked(marker) == []  # nothing ran


    def test_a_runner_whose_own_settings_allow_it_runs_a_server_without_sandbox(self, tier: Runners,
                                                                               web: list[RunnerPool],
                                                                               tmp_path: Path) -> None:
        """The other side of the refusal above: the runner's own setting (r2's), not the web process, allows it."""
        marker = uuid.uuid4().hex
        assert count(web[0], counter_spec(tmp_path, marker, sandboxed=False, tool_id=tier.tool_id(on=OWN)))["count"] == 1
        assert marked(marker)

    def test_a_tenant_saturating_a_runner_leaves_another_tenant_a_slot(self, tier: Runners, web: list[RunnerPool],
                                                                       tmp_path: Path) -> None:
        # r2's slots: TOOLHUB_POOL_MAX_TOTAL=4, TOOLHUB_POOL_MAX_PER_TENANT=10 (OWN_SETTINGS); every server on r2.
        marker = uuid.uuid4().hex
        busy = [mini_spec(tmp_path, marker, tool_id=tier.tool_id(on=OWN), tenant="1") for _ in range(2)]
        release = tmp_path / "tenant.1" / "release"  # in the servers' workspace: the long calls end once it exists
        with ThreadPoolExecutor(max_workers=2) as executor:
            # Tenant 1 alone may hold 4 // (1 + 1) = 2 of the runner's slots: two servers busy with long calls...
            slow = [executor.submit(web[i].call, spec, "slow", {"seconds": 60, "until": str(release)})
                    for i, spec in enumerate(busy)]
            assert wait_until(lambda: len([p for p in marked(marker) if "bwrap" not in
                                           Path(f"/proc/{p}/cmdline").read_text()]) == 2)
            more = [web[i % 2].call(mini_spec(tmp_path, marker, tool_id=tier.tool_id(on=OWN), tenant="1"), "whoami",
                                    {}) for i in range(2)]
            # ...more refused (without shares they would take the last two slots), while tenant 2 gets one, from
            # either web process, before those calls end.
            other = web[1].call(mini_spec(tmp_path, marker, tool_id=tier.tool_id(on=OWN), tenant="2"), "whoami", {})
            assert not any(f.done() for f in slow)  # still holding their slots: nothing released them yet
            assert other.success, (other.error_code, other.error)
            assert all(not r.success and r.meta.get("error_type") == "capacity_exceeded" for r in more), more
            release.touch()
            assert [f.result().success for f in slow] == [True, True]

    def test_calls_go_on_through_a_redis_restart(self, tier: Runners, web: list[RunnerPool],
                                                 tmp_path: Path) -> None:
        spec = counter_spec(tmp_path, uuid.uuid4().hex, tool_id=tier.tool_id())
        assert count(web[0], spec)["count"] == 1
        redis.Redis.from_url(REDIS_URL).flushdb()  # the restarted Redis holds no announcement yet
        web[0].registry.forget()
        assert count(web[0], spec)["count"] == 2  # the same server on the same runner, no "no runner is live"

    def test_a_runner_closes_an_idle_server_whose_key_another_runner_owns_now(self, tier: Runners,
                                                                              web: list[RunnerPool],
                                                                              tmp_path: Path) -> None:
        """A key runs on one runner: one placed elsewhere for a while (its owner was away, then came back) does not
        leave a second, idle server behind until the pool's idle TTL."""
        spec = counter_spec(tmp_path, marker := uuid.uuid4().hex, tool_id=tier.tool_id())
        key = f"{spec.tool_id}:{spec.config_version}"
        found = owner(key, [RunnerInfo(id="r1", url=""), RunnerInfo(id="r2", url="")])
        assert found is not None
        back = found.id  # the key's owner once it is up
        first = "r2" if back == "r1" else "r1"
        # Away (stopped, not killed: its coming back is then a heartbeat, not a Django start-up of seconds): no
        # runner of it live, its withdrawal signed as a stopping runner's is.
        tier.pause(back)
        tier.registry.withdraw(back)
        web[0].registry.forget()
        assert count(web[0], spec)["count"] == 1  # only the other runner is live: the server runs there
        on_first = set(servers(marker))
        assert len(on_first) == 1
        tier.resume(back)
        tier.restore("r1", "r2")  # the owner comes back: announced by its next heartbeat
        web[0].registry.forget()
        assert web[0].owner_of(spec).id == back
        assert count(web[0], spec)["count"] == 1  # a new server on the owner
        # The other closes its server once it has been idle a while (on a slow machine, maybe before the call above).
        assert wait_until(lambda: not on_first & set(servers(marker))), f"{first} kept the server of a key " \
            f"{back} owns"
        assert len(servers(marker)) == 1
        assert count(web[1], spec)["count"] == 2  # the owner's server is the one left


    # Last of the class: it kills a runner, which the next test of the class would wait to start again (a Django
    # start-up, seconds of CPU); the tests above leave both runners as they found them.
    def test_a_dead_runners_server_starts_again_on_another_and_only_its_running_call_fails(
            self, tier: Runners, web: list[RunnerPool], tmp_path: Path) -> None:
        """The runner kill of the load bench, made exact: its process stops (as a SIGKILLed process does before the
        kernel has torn it down) while it runs one call, two more calls reach it (one plain, on the connection the
        call before kept alive unless it aged out meanwhile; one streamed, on a new connection), then it dies
        (SIGKILL: no goodbye, its heartbeat simply stops). The call it was running fails with the typed
        runner_unavailable; the two it never read go to the key's next owner and succeed there, on a new server."""
        marker = uuid.uuid4().hex
        spec = counter_spec(tmp_path, marker, tool_id=tier.tool_id())
        assert count(web[0], spec)["count"] == 1
        assert count(web[1], spec)["count"] == 2  # web[1] keeps its connection to the owner alive for the next call
        owner = web[0].owner_of(spec)
        port = int(owner.url.rsplit(":", 1)[1])
        note = tmp_path / "tenant.1" / f"hold-{marker}"
        with ThreadPoolExecutor(3) as calls:
            running = calls.submit(web[0].call, spec, "hold", {"seconds": 60, "note": str(note)})
            assert wait_until(note.exists), "the held call never started"
            os.kill(tier.procs[owner.id].pid, signal.SIGSTOP)
            kept_alive = calls.submit(web[1].call, spec, "count", {})
            streamed = calls.submit(web[1].call, spec, "count", {}, None, lambda *_: None)
            assert wait_until(lambda: unread_requests(port) >= 2), "the two calls never reached the stopped runner"
            before = set(marked(marker))
            tier.kill(owner.id)
            failed = running.result(timeout=PROCESS_BOUND_S)
            moved = [future.result(timeout=PROCESS_BOUND_S) for future in (kept_alive, streamed)]
        # It ended with its runner (runner_unavailable), not at its 60 s (that would be a timeout).
        assert not failed.success and failed.meta.get("outage") == "runner_unavailable", failed
        assert all(result.success for result in moved), [(r.error_code, r.error) for r in moved]
        answers = [dict(r.data or json.loads(r.text)) for r in moved]
        # A new server (its count starts over) on the other runner, which ran each call once.
        assert sorted(a["count"] for a in answers) == [1, 2] and len({a["pid"] for a in answers}) == 1
        assert web[1].owner_of(spec, frozenset({owner.id})).id != owner.id
        assert wait_until(lambda: not set(marked(marker)) & before), "the killed runner's server outlived it"


def test_no_live_runner_is_the_deployments_outage_not_the_tools(runners: Runners, web: list[RunnerPool],
                                                                tmp_path: Path) -> None:
    # No runner announced (Redis restarted and emptied, the runners' next heartbeat not yet sent): the call fails,
    # and says it is the deployment's outage so the tool's breaker does not pause a healthy tool for it.
    result = web[0].call(counter_spec(tmp_path, uuid.uuid4().hex), "count", {})
    assert not result.success and result.error_code == "EXECUTION_ERROR"
    assert result.meta.get("outage") == "runner_unavailable"
    assert "outage" not in result.as_dict()  # internal: what a caller gets is the typed failure


def test_a_runner_refuses_a_heartbeat_that_would_let_its_announcement_lapse(settings: Any) -> None:
    from django.core.management import CommandError, call_command

    settings.TOOLHUB_RUNNERS, settings.REDIS_URL, settings.TOOLHUB_RUNNER_SECRET = "redis", REDIS_URL, SECRET
    settings.TOOLHUB_RUNNER_TTL_S, settings.TOOLHUB_RUNNER_HEARTBEAT_S = 6, 6
    with pytest.raises(CommandError, match="must be below TOOLHUB_RUNNER_TTL_S"):
        call_command("toolhub_runner", "--port", str(free_port()), "--id", "lapsing")


def test_a_redis_restart_keeps_the_verified_runners_until_their_signed_expiry() -> None:
    """Redis only carries the announcements: a restarted Redis comes back empty, and one that is down cannot be read;
    neither takes a runner out before its signed expiry (LOCAL calls go on). A signed withdrawal does."""
    server = redis.Redis.from_url(REDIS_URL)
    server.flushdb()
    registry = Registry(REDIS_URL, ttl_s=RUNNER_TTL_S, secret=SECRET)
    registry.announce(RunnerInfo(id="r1", url="http://127.0.0.1:1", since=time.time()))
    registry.announce(RunnerInfo(id="r2", url="http://127.0.0.1:2", since=time.time()))
    reader = Registry(REDIS_URL, ttl_s=RUNNER_TTL_S, secret=SECRET)
    assert [r.id for r in reader.runners(max_age_s=0)] == ["r1", "r2"]

    server.flushdb()  # Redis restarted without its data, before the runners' next heartbeat
    assert [r.id for r in reader.runners(max_age_s=0)] == ["r1", "r2"]
    assert Registry(REDIS_URL, ttl_s=RUNNER_TTL_S, secret=SECRET).runners(max_age_s=0) == []  # nothing to go on

    # Down: the registry's own client (one immediate retry, no backoff) on a port nothing listens on.
    reader.redis = Registry(f"redis://127.0.0.1:{free_port()}/0", ttl_s=RUNNER_TTL_S, secret=SECRET).redis
    assert [r.id for r in reader.runners(max_age_s=0)] == ["r1", "r2"] and reader.redis_down
    reader.redis = server
    registry.withdraw("r1")  # r1 stopped: its withdrawal, signed, takes it out at once
    assert [r.id for r in reader.runners(max_age_s=0)] == ["r2"] and not reader.redis_down
    forged = {"withdrawn": {"id": "r2", "at": time.time()}, "sig": "0" * 64}
    server.set("toolhub:runner:r2", json.dumps(forged))  # an unsigned withdrawal is ignored like any forgery
    assert [r.id for r in reader.runners(max_age_s=0)] == ["r2"]
    assert reader.rejected == 1




@pytest.mark.django_db(transaction=True)
def test_an_invoke_no_runner_can_take_answers_the_typed_503_and_spares_the_breaker(api: Any) -> None:
    """No LOCAL server runner reachable (all down, or none announced yet): the deployment's outage, answered as the
    API's typed 503 with Retry-After (as for a database or cache outage), audited, and not the tool's failure."""
    from tools_app.models import CallStatus, Tool, ToolCall
    from tools_app.wiring.pool import pool, swap_pool

    # The dependency-free inventory (MINI): what is tested is the runner tier's outage, not the MCP SDK's server, and
    # its two starts here (the refresh, the last call) take milliseconds instead of a second of CPU each.
    resp = api.post("/api/v1/tools/", {"name": "inventory", "type": "LOCAL", "config": {
        "command": sys.executable, "args": [str(MINI)], "startup_timeout_s": 20}}, format="json")
    assert resp.status_code == 201, resp.content
    tool_id = int(resp.json()["id"])
    assert api.post(f"/api/v1/tools/{tool_id}/refresh/").json()["ok"]
    nobody = Registry(f"redis://127.0.0.1:{free_port()}/0", ttl_s=RUNNER_TTL_S, secret=SECRET)  # no runner known
    old = swap_pool(RunnerPool(SessionPool(policy=OutboundPolicy.build("")), nobody, SECRET))
    try:
        for _ in range(4):  # more than the breaker's threshold
            resp = api.post(f"/api/v1/tools/{tool_id}/invoke/",
                            {"function": "get_inventory", "arguments": {"sku": "DEMO-001"}}, format="json")
            assert resp.status_code == 503 and resp["Retry-After"] == "2", resp.content
            error = resp.json()["error"]
            assert error["code"] == "runner_unavailable" and "runner" in error["message"]
            assert error["details"]["service"] == "runner" and error["details"]["retry_after_s"] == 2
        assert ToolCall.objects.get(pk=error["details"]["call_id"]).status == CallStatus.ERROR
        tool = Tool.objects.get(pk=tool_id)
        assert tool.consecutive_failures == 0 and tool.disabled_until is None
    finally:
        swap_pool(old)
        pool().close_all()
    resp = api.post(f"/api/v1/tools/{tool_id}/invoke/", {"function": "get_inventory", "arguments": {"sku": "DEMO-001"}},
                    format="json")
    assert resp.status_code == 200 and resp.json()["success"], resp.content
