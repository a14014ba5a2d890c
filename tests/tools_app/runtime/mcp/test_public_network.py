"""The `public` network of a tenant's LOCAL servers: the internet side of a test network namespace is reached; Redis,
PostgreSQL, a runner and a web process on the host (loopback and the host's own addresses) are not."""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.tools_app.runtime.mcp.conftest import Specs
from tests.tools_app.runtime.mcp.test_sandbox import call, sandbox_for, sandboxed
from tests.waiting import PROCESS_BOUND_S, scaled, wait_until
from tools_app.runtime import netjail
from tools_app.runtime.mcp import SessionPool
from tools_app.runtime.sandbox import SandboxPolicy, SandboxUnavailable

pytestmark = [
    pytest.mark.skipif(not os.access(SandboxPolicy().bwrap, os.X_OK), reason="bubblewrap not installed"),
    pytest.mark.skipif(netjail.available() is None, reason="slirp4netns not installed (apt-get install slirp4netns)"),
    pytest.mark.skipif(os.geteuid() != 0 or shutil.which("ip") is None,
                       reason="a test network namespace needs root and iproute2"),
]


class Internet:
    """A network namespace joined to the host by a veth pair: its side (198.51.100.x) stands for the internet."""

    def __init__(self) -> None:
        tag = secrets.token_hex(3)
        self.ns, self.veth = f"th-inet-{tag}", f"thi{tag}"
        block = 4 * secrets.randbelow(60) + 4  # a /30 of 198.51.100.0/24 (TEST-NET-2: neither private nor ours)
        self.host_side, self.address = f"198.51.100.{block + 1}", f"198.51.100.{block + 2}"
        ip = ["ip"]
        for argv in ([*ip, "netns", "add", self.ns],
                     [*ip, "link", "add", self.veth, "type", "veth", "peer", "name", self.veth + "p"],
                     [*ip, "link", "set", self.veth + "p", "netns", self.ns],
                     [*ip, "addr", "add", f"{self.host_side}/30", "dev", self.veth],
                     [*ip, "link", "set", self.veth, "up"],
                     [*ip, "netns", "exec", self.ns, "ip", "addr", "add", f"{self.address}/30", "dev", self.veth + "p"],
                     [*ip, "netns", "exec", self.ns, "ip", "link", "set", self.veth + "p", "up"],
                     [*ip, "netns", "exec", self.ns, "ip", "link", "set", "lo", "up"]):
            subprocess.run(argv, check=True, capture_output=True, timeout=scaled(30))
        self.port = 8000 + secrets.randbelow(1000)
        # A server on the internet side, counting the connections it accepts.
        self.server = subprocess.Popen(
            ["ip", "netns", "exec", self.ns, sys.executable, "-c",
             "import socket,sys\n"
             "s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
             f"s.bind(({self.address!r}, {self.port})); s.listen(16); print('up', flush=True)\n"
             "while True:\n"
             "    c,_=s.accept(); print('accepted', flush=True); c.close()\n"],
            stdout=subprocess.PIPE, text=True, start_new_session=True)
        assert self.server.stdout is not None and self.server.stdout.readline().strip() == "up"
        self.accepted = 0
        threading.Thread(target=self._count, daemon=True).start()

    def _count(self) -> None:
        assert self.server.stdout is not None
        for line in self.server.stdout:
            if line.strip() == "accepted":
                self.accepted += 1

    def close(self) -> None:
        os.killpg(self.server.pid, 9)
        self.server.wait(10)
        subprocess.run(["ip", "link", "del", self.veth], capture_output=True, timeout=scaled(30))
        subprocess.run(["ip", "netns", "del", self.ns], capture_output=True, timeout=scaled(30))


@pytest.fixture
def internet() -> Iterator[Internet]:
    made = Internet()
    try:
        yield made
    finally:
        made.close()


class HostService:
    """A listener on every host address (0.0.0.0) standing for a runner or web process; it records who came."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("0.0.0.0", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            conn.close()


def host_addresses() -> list[str]:
    return [a for a in netjail.host_addresses() if not a.startswith("127.")]


def test_public_reaches_the_internet_side_but_nothing_of_the_host(pool: SessionPool, specs: Specs, tmp_path: Path,
                                                                  internet: Internet) -> None:
    service = HostService()
    try:
        spec = sandboxed(specs, sandbox_for(tmp_path, 7, public_net=True))
        reached = call(pool, spec, "connect", {"host": internet.address, "port": internet.port})
        assert reached["ok"] is True, reached
        assert wait_until(lambda: internet.accepted >= 1)
        # Redis and PostgreSQL on the host's loopback, the runner/web stand-in on every host address, the
        # host-loopback alias of the user-mode stack, the cloud metadata address and private ranges.
        targets: list[tuple[str, int]] = [("127.0.0.1", 6379), ("127.0.0.1", 5432), ("127.0.0.1", service.port),
                                          ("10.0.2.2", 6379), ("10.0.2.2", service.port), ("169.254.169.254", 80),
                                          ("10.0.0.1", service.port), ("192.168.0.1", service.port),
                                          ("172.17.0.1", service.port)]
        targets += [(address, service.port) for address in [*host_addresses(), internet.host_side]]
        assert internet.host_side in [a for a, _ in targets]
        refused = {f"{h}:{p}": call(pool, spec, "connect", {"host": h, "port": p}) for h, p in targets}
        assert all(r["ok"] is False for r in refused.values()), refused
        assert service.accepted == 0
        # none and host, for contrast: none reaches nothing at all, host reaches the host's own loopback.
        none = sandboxed(specs, sandbox_for(tmp_path, 8), tool_id=2)
        assert call(pool, none, "connect", {"host": internet.address, "port": internet.port})["ok"] is False
        host = sandboxed(specs, sandbox_for(tmp_path, 9, share_net=True), tool_id=3)
        assert call(pool, host, "connect", {"host": "127.0.0.1", "port": service.port})["ok"] is True
    finally:
        service.sock.close()


def test_public_without_slirp4netns_is_refused_naming_what_to_install(pool: SessionPool, specs: Specs, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(netjail, "available", lambda slirp=netjail.SLIRP: None)
    spec = sandboxed(specs, sandbox_for(tmp_path, 7, public_net=True))
    result: Any = pool.call(spec, "whoami", {})
    assert result.success is False, result
    assert "slirp4netns" in (result.error or "") and "apt-get install slirp4netns" in (result.error or "")
    assert SandboxUnavailable.__name__  # the typed error the launch raised (its message is what the caller sees)


def test_where_the_ranges_cannot_be_closed_the_command_never_runs(tmp_path: Path) -> None:
    """The launcher holds bubblewrap on --block-fd until every route is in place; a failure kills it first."""
    ran = tmp_path / "ran-anyway"
    tmp_path.chmod(0o777)
    argv = [sys.executable, netjail.__file__, "--block", "1.2.3.4/40", "--", SandboxPolicy().bwrap, "--unshare-all",
            "--die-with-parent", "--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib",
            "/lib", "--symlink", "usr/lib64", "/lib64", "--bind", str(tmp_path), str(tmp_path), "--proc", "/proc",
            "--dev", "/dev", "--", "/bin/sh", "-c", f"touch {ran}"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=scaled(60))
    assert done.returncode != 0 and "1.2.3.4/40" in done.stderr
    assert not ran.exists()


def _registry_reachable() -> bool:
    try:
        with socket.create_connection(("pypi.org", 443), timeout=5):
            return True
    except OSError:
        return False


@pytest.mark.skipif(not _registry_reachable(), reason="this host does not reach pypi.org")
def test_public_resolves_names_and_fetches_from_the_package_registry(tmp_path: Path) -> None:
    """What `uvx`/`npx` do when they start a server: resolve the registry and fetch over HTTPS, from the sandbox."""
    from tools_app.configs import server_spec
    from tools_app.runtime.mcp.process import launch
    from tools_app.runtime.mcp.spec import LocalSpec

    box = sandbox_for(tmp_path, 7, public_net=True)
    spec = server_spec(tool_id=1, config_version=1, tenant_key="7", tool_type="LOCAL",
                       config={"command": sys.executable}, sandbox=box)
    code = ("import urllib.request; print(urllib.request.urlopen('https://pypi.org/simple/mcp/', timeout=30).status)")
    assert isinstance(spec.target, LocalSpec)
    how = launch(sys.executable, spec.target, [sys.executable, "-c", code])
    done = subprocess.run(how.argv, env=how.env, cwd=how.cwd, capture_output=True, text=True, timeout=PROCESS_BOUND_S)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "200"
