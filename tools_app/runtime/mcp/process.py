"""LOCAL server processes: command resolution, clean env, own process group, stderr tail, no-orphan stop."""

from __future__ import annotations

import errno
import os
import secrets
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import anyio
from anyio.abc import Process

from tools_app.runtime import netjail
from tools_app.runtime.cgroups import memory_cgroup
from tools_app.runtime.errors import CommandNotExecutable, CommandNotFound, ConnectionFailed
from tools_app.runtime.mcp.spec import LocalSpec
from tools_app.runtime.procenv import (
    PROCESS_TAG_ENV,
    base_environment,
    descendant_pids,
    identities_of,
    live_identities,
    signal_identities,
    tagged_pids,
)
from tools_app.runtime.sandbox import (
    SandboxPathRefused,
    SandboxUnavailable,
    bwrap_argv,
    check_available,
    prlimit_options,
    sandbox_env,
)

STDERR_TAIL_BYTES = 8 * 1024
STDIN_CLOSE_GRACE_S = 1.0
TERM_GRACE_S = 1.0
KILL_REAP_S = 2.0
T = TypeVar("T")

# pid of a running server -> the tag its whole process tree carries (see procenv.PROCESS_TAG_ENV).
_tags: dict[int, str] = {}
VERSION_CHECK_TIMEOUT_S = 5.0
# What to install when a runner a LOCAL command names is missing (with package runners on, Toolhub runs the package
# from its store instead, so these matter only where TOOLHUB_PACKAGES is off or the command is the runtime itself).
_NODE = "install Node.js 18 or newer with npm (Debian/Ubuntu: `apt-get install nodejs npm`)"
_UV = "`make install` provides uv in Toolhub's virtualenv; elsewhere `pip install uv`"
RUNNER_HINTS = {"npx": _NODE, "npm": _NODE, "node": _NODE, "uvx": _UV, "uv": _UV, "pipx": "`pip install pipx`",
                "bunx": "install Bun (https://bun.sh), or run the package with npx"}


def resolve_command(spec: LocalSpec) -> str:
    """The absolute executable for `spec.command`, or a typed error naming the command.

    A sandboxed server's command must be one the sandbox can see (a mounted runtime or a file in the workspace)."""
    found = _resolve(spec)
    if spec.sandbox is not None and not spec.sandbox.visible(found):
        raise SandboxPathRefused(
            f"command {spec.command!r} is not visible inside the LOCAL server sandbox: it may run programs of the "
            "system folders, of the runtimes the operator mounts (TOOLHUB_LOCAL_SANDBOX_RO_PATHS) and of the "
            "tenant workspace",
            details={"command": spec.command},
        )
    return found


def _resolve(spec: LocalSpec) -> str:
    command = spec.command
    if os.sep in command or (os.altsep and os.altsep in command):
        base = str(spec.sandbox.chdir(spec.cwd)) if spec.sandbox is not None else spec.cwd or os.getcwd()
        # Normalised: `a/../b` names a folder the sandbox may not have, even where `b` is mounted.
        path = os.path.normpath(command if os.path.isabs(command) else os.path.join(base, command))
        if not os.path.exists(path):
            raise CommandNotFound(f"command {command!r} not found", details={"command": command})
        if os.path.isdir(path) or not os.access(path, os.X_OK):
            raise CommandNotExecutable(
                f"command {command!r} is not an executable file", details={"command": command}
            )
        return path
    # Resolve against the PATH the child will see, not only ours.
    env = child_environment(spec)
    found = shutil.which(command, path=env.get("PATH"))
    if found is None:
        hint = RUNNER_HINTS.get(os.path.basename(command))
        raise CommandNotFound(
            f"command {command!r} not found on PATH" + (f": {hint}" if hint else ""), details={"command": command}
        )
    return found


def child_environment(spec: LocalSpec) -> dict[str, str]:
    """Allowlisted base environment plus the tool's configured env; nothing else of ours.

    Inside the sandbox nothing of the host's environment at all: the sandbox's own PATH/HOME plus the config's."""
    if spec.sandbox is not None:
        return sandbox_env(spec.sandbox.policy, dict(spec.env))
    return base_environment(dict(spec.env))


def check_cwd(spec: LocalSpec) -> None:
    cwd = str(spec.sandbox.chdir(spec.cwd)) if spec.sandbox is not None else spec.cwd
    if cwd is not None and not os.path.isdir(cwd):
        raise ConnectionFailed(f"working directory {spec.cwd!r} does not exist", details={"cwd": spec.cwd})


@dataclass(frozen=True)
class Launch:
    """How to start a server's program: the argv (bwrap's when sandboxed), its environment and cwd."""

    argv: list[str]
    env: dict[str, str]
    cwd: str | None


def launch(executable: str, spec: LocalSpec, argv: list[str], extra_env: dict[str, str] | None = None) -> Launch:
    """`argv` as the server runs it: plain in its cwd, or inside the tenant's sandbox (bwrap with a clean env)."""
    env = {**child_environment(spec), **(extra_env or {})}
    sandbox = spec.sandbox
    if sandbox is None:
        return Launch(argv=argv, env=env, cwd=spec.cwd)
    bwrap = check_available(sandbox.policy)
    public = sandbox.public_net and not sandbox.share_net
    if public and netjail.available() is None:
        raise SandboxUnavailable(
            f"this tenant's LOCAL servers have the `public` network, which needs slirp4netns on the host running "
            f"them: {netjail.INSTALL_HINT}", details={"network": "public", "install": "apt-get install slirp4netns"})
    full = bwrap_argv(
        sandbox.policy,
        bwrap=bwrap,
        workspace=Path(os.path.realpath(sandbox.workspace)),
        argv=argv,
        env=env,
        uid=sandbox.uid,
        share_net=sandbox.share_net,
        chdir=sandbox.chdir(spec.cwd),
        limits=prlimit_options(sandbox.policy),
        resolv_conf=netjail.RESOLV_CONF if public else None,
    )
    if public:  # bubblewrap waits until the launcher has attached the network and closed the non-internet ranges
        full = [sys.executable, netjail.__file__, "--", *full]
    policy = sandbox.policy
    group = memory_cgroup(sandbox.tenant_key, policy.tenant_memory_bytes, configured=policy.cgroup_root)
    if group is not None:
        # Joined before bwrap starts: a sandbox moved in afterwards would leave the processes it already forked out.
        full = ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', str(group.procs), *full]
    # bwrap itself (pid 1 of the sandbox, whose /proc/1/environ the server can read) gets nothing of ours.
    return Launch(argv=full, env={"PATH": os.defpath, "LANG": "C.UTF-8"}, cwd="/")


@dataclass
class StderrTail:
    """The last STDERR_TAIL_BYTES of a child's stderr, fed by a drain task."""

    limit: int = STDERR_TAIL_BYTES
    _buf: bytearray = field(default_factory=bytearray)

    def feed(self, chunk: bytes) -> None:
        self._buf += chunk
        if len(self._buf) > self.limit:
            del self._buf[: len(self._buf) - self.limit]

    def text(self) -> str:
        return self._buf.decode("utf-8", errors="replace").strip()


async def run_version_check(executable: str, spec: LocalSpec) -> None:
    """`<cmd> --version` must exit 0 within VERSION_CHECK_TIMEOUT_S (its own group, killed on timeout)."""

    how = launch(executable, spec, [executable, "--version"])

    def _run() -> subprocess.CompletedProcess[bytes]:
        proc = subprocess.Popen(
            how.argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=how.env,
            cwd=how.cwd,
            start_new_session=True,
        )
        try:
            out, _ = proc.communicate(timeout=VERSION_CHECK_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            _killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise
        return subprocess.CompletedProcess(proc.args, proc.returncode, out)

    try:
        done = await anyio.to_thread.run_sync(_run)
    except subprocess.TimeoutExpired:
        raise ConnectionFailed(
            f"command {spec.command!r} --version did not finish within {VERSION_CHECK_TIMEOUT_S:g} s"
        ) from None
    if done.returncode != 0:
        tail = done.stdout[-STDERR_TAIL_BYTES:].decode("utf-8", errors="replace").strip()
        raise ConnectionFailed(
            f"command {spec.command!r} --version exited with status {done.returncode}: {tail}"
        )


async def spawn(executable: str, spec: LocalSpec) -> Process:
    """Start the server in its own session/process group with piped stdio."""
    check_cwd(spec)
    tag = secrets.token_hex(16)
    how = launch(executable, spec, [executable, *spec.args], {PROCESS_TAG_ENV: tag})
    try:
        process = await anyio.open_process(how.argv, env=how.env, cwd=how.cwd, start_new_session=True)
    except PermissionError:
        raise CommandNotExecutable(f"command {spec.command!r} is not executable") from None
    except FileNotFoundError:
        raise CommandNotFound(f"command {spec.command!r} not found") from None
    except OSError as exc:
        if exc.errno == errno.ENOEXEC:
            raise CommandNotExecutable(
                f"command {spec.command!r} is not an executable program ({exc.strerror})"
            ) from None
        raise ConnectionFailed(f"command {spec.command!r} could not start: {exc.strerror}") from None
    _tags[process.pid] = tag
    return process


def _killpg(pgid: int, sig: int) -> bool:
    """Signal a group; False when it is gone."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def group_alive(pgid: int) -> bool:
    return _killpg(pgid, 0)


async def _wait_exit(process: Process, timeout: float) -> bool:
    with anyio.move_on_after(timeout):
        while process.returncode is None:
            await anyio.sleep(0.01)
        return True
    return process.returncode is not None


async def _wait_group_gone(pgid: int, timeout: float) -> bool:
    with anyio.move_on_after(timeout):
        while group_alive(pgid):
            await anyio.sleep(0.01)
        return True
    return not group_alive(pgid)


async def stop_process(process: Process, *, stdin_grace_s: float = STDIN_CLOSE_GRACE_S) -> None:
    """Close stdin, wait, SIGTERM, wait, SIGKILL: the group and every process the server started
    (including ones that left the group with setsid or were reparented); always reap. Shielded, bounded."""
    pgid = process.pid  # start_new_session: the leader's pid is the group id
    tag = _tags.pop(pgid, None)
    with anyio.CancelScope(shield=True):
        # Parent links are lost once the leader exits: note its tree while it is still there.
        strays = await _scan(descendant_pids, pgid) if process.returncode is None else set()
        if process.stdin is not None:
            try:
                await process.stdin.aclose()
            except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass
        exited = await _wait_exit(process, stdin_grace_s)
        strays = live_identities(strays | (await _scan(tagged_pids, tag) if tag else set()))
        # Even when the leader left politely, its descendants may live on: sweep them too.
        if not exited or group_alive(pgid) or strays:
            _killpg(pgid, signal.SIGTERM)
            strays = signal_identities(strays, signal.SIGTERM)
            if not await _wait_all_gone(process, pgid, strays, TERM_GRACE_S):
                _killpg(pgid, signal.SIGKILL)
                late = await _scan(tagged_pids, tag) if tag else set()
                strays = signal_identities(live_identities(strays) | late, signal.SIGKILL)
                await _wait_exit(process, KILL_REAP_S)
                await _wait_all_gone(process, pgid, strays, KILL_REAP_S)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                try:
                    await stream.aclose()
                except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                    pass
        _close_transport(process)


async def _scan(find: Callable[[T], set[int]], key: T) -> set[str]:
    """Run a /proc scan off the event loop (it reads every process's stat or environ)."""
    return identities_of(await anyio.to_thread.run_sync(find, key))


async def _wait_all_gone(process: Process, pgid: int, strays: set[str], timeout: float) -> bool:
    """True once the group, the leader and every stray are gone."""
    with anyio.move_on_after(timeout):
        while True:
            _ = process.returncode  # let the loop reap the leader
            if process.returncode is not None and not group_alive(pgid) and not live_identities(strays):
                return True
            await anyio.sleep(0.01)
    return False


def _close_transport(process: Process) -> None:
    # asyncio keeps the subprocess transport (and its pipe fds) until GC otherwise.
    transport = getattr(getattr(process, "_process", None), "_transport", None)
    close = getattr(transport, "close", None)
    if callable(close):
        try:
            close()
        except PermissionError:
            pass
