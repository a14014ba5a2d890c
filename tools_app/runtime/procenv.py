"""Child-process hygiene shared by MCP stdio servers and execute_command: clean env, group kill."""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Iterator, Mapping

# Only these reach a child from Toolhub's own environment; secrets and DB URLs never do.
BASE_ENV_KEYS = ("PATH", "HOME", "LANG", "TZ", "TMPDIR", "USER", "LOGNAME")
WINDOWS_ENV_KEYS = ("SYSTEMROOT", "PATHEXT", "COMSPEC", "WINDIR")


def base_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The allowlisted part of os.environ (PATH, HOME, LANG, LC_*, TZ, TMPDIR) plus `extra`."""
    keys = BASE_ENV_KEYS + (WINDOWS_ENV_KEYS if sys.platform == "win32" else ())
    env = {k: v for k, v in os.environ.items() if k in keys or k.startswith("LC_")}
    env.setdefault("PATH", os.defpath)
    if extra:
        env.update({str(k): str(v) for k, v in extra.items()})
    return env


def kill_process_group(pgid: int, *, term_wait_s: float = 2.0) -> None:
    """SIGTERM the group, wait, then SIGKILL whatever is left. Never raises for a gone group."""
    if sys.platform == "win32":  # pragma: no cover - not a target platform
        return
    for sig, wait in ((signal.SIGTERM, term_wait_s), (signal.SIGKILL, 1.0)):
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if not group_running(pgid):
                return
            time.sleep(0.02)


def group_running(pgid: int) -> bool:
    """Whether a process of the group still runs. A zombie (exited, not yet reaped by its parent) does not: the
    leader of a group we started is our own child and stays a zombie until we wait for it, so asking the kernel
    alone (`killpg(pgid, 0)`) would wait out every timeout for processes that are already gone."""
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    if not os.path.isdir("/proc"):  # pragma: no cover - Linux is the target; elsewhere the kernel's answer
        return True
    return any(fields[2] == str(pgid) for _, fields in _live_processes())  # fields: state ppid pgrp ...


# -- every process a child started, wherever it went ----------------------------------------------

# A random value in this variable marks every process a LOCAL server starts: descendants inherit it even
# after `setsid`, a double fork or reparenting to init, so none escapes the stop (unless it wipes its env).
PROCESS_TAG_ENV = "TOOLHUB_PROCESS_TAG"


def _stat_fields(pid: int) -> list[str] | None:
    try:
        raw = open(f"/proc/{pid}/stat", "rb").read().decode("utf-8", "replace")
    except OSError:
        return None
    return raw.rsplit(")", 1)[1].split()  # after "pid (comm)": state ppid pgrp ... starttime is [19]


def _live_processes() -> Iterator[tuple[int, list[str]]]:
    """(pid, stat fields) of every process that has not exited (zombies left out), read from /proc."""
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if entry.isdigit():
            fields = _stat_fields(int(entry))
            if fields is not None and fields[0] not in ("Z", "X"):
                yield int(entry), fields


def process_identity(pid: int) -> str | None:
    """pid plus its start time: the same process, not a reused pid. None when gone or a zombie."""
    fields = _stat_fields(pid)
    if fields is None or fields[0] in ("Z", "X"):
        return None
    return f"{pid}:{fields[19]}"


def descendant_pids(root: int) -> set[int]:
    """Every live descendant of `root` (by parent links, read from /proc)."""
    children: dict[int, list[int]] = {}
    for pid, fields in _live_processes():
        children.setdefault(int(fields[1]), []).append(pid)
    found: set[int] = set()
    todo = [root]
    while todo:
        for kid in children.get(todo.pop(), ()):
            if kid not in found:
                found.add(kid)
                todo.append(kid)
    return found


def tagged_pids(tag: str) -> set[int]:
    """Every live process whose environment carries PROCESS_TAG_ENV=tag."""
    needle = f"\0{PROCESS_TAG_ENV}={tag}\0".encode()
    found: set[int] = set()
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if not entry.isdigit():
            continue
        try:
            environ = open(f"/proc/{entry}/environ", "rb").read()
        except OSError:
            continue
        if needle in b"\0" + environ + b"\0" and process_identity(int(entry)) is not None:
            found.add(int(entry))
    return found


def signal_identities(identities: set[str], sig: int) -> set[str]:
    """Send `sig` to each still-identical process; return those still alive."""
    alive: set[str] = set()
    for ident in identities:
        pid = int(ident.split(":", 1)[0])
        if process_identity(pid) != ident:
            continue
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            continue
        alive.add(ident)
    return alive


def end_processes(identities: set[str], *, wait_s: float = 1.0) -> set[str]:
    """SIGKILL each still-identical process and wait until they are gone; those still alive at the deadline."""
    alive = signal_identities(identities, signal.SIGKILL)
    deadline = time.monotonic() + wait_s
    while alive and time.monotonic() < deadline:
        time.sleep(0.01)
        alive = live_identities(alive)
    return alive


def live_identities(identities: set[str]) -> set[str]:
    return {i for i in identities if process_identity(int(i.split(":", 1)[0])) == i}


def identities_of(pids: set[int]) -> set[str]:
    return {ident for ident in (process_identity(p) for p in pids) if ident is not None}
