"""The topology's processes, found from /proc by parent links rather than by command line.

deploy/prod_local.py (the supervisor) starts two gunicorn masters (each with its workers), a Celery worker and beat,
and the LOCAL server runners (`manage.py toolhub_runner`). LOCAL MCP servers run sandboxed: a bubblewrap (`bwrap`)
process under the web worker or runner that holds the session, with the server inside its own pid namespace. A
server's command line says nothing reliable from outside (inside the sandbox it is whatever the tool's config
runs), so a server is found as the sandbox's process tree: a `bwrap` descendant of a web or runner process, and the
processes under it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    comm: str
    state: str


def snapshot() -> dict[int, Proc]:
    """Every live (not zombie) process: pid -> Proc."""
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            raw = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        comm = raw[raw.index("(") + 1:raw.rindex(")")]
        fields = raw.rsplit(")", 1)[1].split()
        if fields[0] != "Z":
            out[int(entry)] = Proc(int(entry), int(fields[1]), comm, fields[0])
    return out


def children(procs: dict[int, Proc], pid: int) -> list[int]:
    return sorted(p.pid for p in procs.values() if p.ppid == pid)


def descendants(procs: dict[int, Proc], pid: int) -> list[int]:
    out: list[int] = []
    todo = children(procs, pid)
    while todo:
        nxt = todo.pop()
        out.append(nxt)
        todo.extend(children(procs, nxt))
    return sorted(out)


def argv(pid: int) -> list[str]:
    try:
        return [a.decode(errors="replace") for a in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if a]
    except OSError:
        return []


def environ_has(pid: int, item: str) -> bool:
    try:
        return item.encode() in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False


@dataclass(frozen=True)
class Sandbox:
    """One sandboxed LOCAL server: its outermost bwrap, the process holding it (web worker or runner), and the
    processes inside (bwrap's pid-namespace init and the server with whatever it started)."""

    bwrap: int
    holder: int
    inside: tuple[int, ...]

    @property
    def server(self) -> int:
        """The innermost non-bwrap process: the MCP server itself (else the bwrap when nothing else is left)."""
        return self.inside[-1] if self.inside else self.bwrap


class Topology:
    """The processes of one prod_local run, found from its supervisor's pid."""

    def __init__(self, supervisor: int) -> None:
        self.supervisor = supervisor

    def _tree(self) -> tuple[dict[int, Proc], list[int]]:
        procs = snapshot()
        return procs, children(procs, self.supervisor)

    def runners(self) -> list[int]:
        """Runner processes: the supervisor's children that run `toolhub_runner`."""
        procs, kids = self._tree()
        return [pid for pid in kids if "toolhub_runner" in argv(pid)]

    def web_masters(self) -> list[int]:
        procs, kids = self._tree()
        return [pid for pid in kids if any(a.endswith("gunicorn") for a in argv(pid)[:2])]

    def web_workers(self) -> list[int]:
        procs, kids = self._tree()
        masters = [pid for pid in kids if any(a.endswith("gunicorn") for a in argv(pid)[:2])]
        return sorted(w for m in masters for w in children(procs, m) if procs[w].comm != "bwrap")

    def web_pids(self) -> list[int]:
        return sorted(self.web_masters() + self.web_workers())

    def sandboxes(self, holders: list[int] | None = None) -> list[Sandbox]:
        """Sandboxed servers under `holders` (default: every web worker and runner)."""
        procs = snapshot()
        if holders is None:
            holders = self.web_workers() + self.runners()
        found = []
        for holder in holders:
            for pid in descendants(procs, holder):
                proc = procs.get(pid)
                parent = procs.get(proc.ppid) if proc else None
                if proc is None or proc.comm != "bwrap" or (parent is not None and parent.comm == "bwrap"):
                    continue  # only the outermost bwrap of each sandbox
                inside = tuple(p for p in descendants(procs, pid) if procs[p].comm != "bwrap")
                found.append(Sandbox(bwrap=pid, holder=holder, inside=inside))
        return found

    def sandboxes_by_runner(self) -> dict[int, list[Sandbox]]:
        return {runner: self.sandboxes([runner]) for runner in self.runners()}


def own_supervisor() -> int:
    """The deploy/prod_local.py this process started (prod_topology runs it as a direct child)."""
    procs = snapshot()
    for pid in children(procs, os.getpid()):
        if any(a.endswith("deploy/prod_local.py") for a in argv(pid)):
            return pid
    raise LookupError("no deploy/prod_local.py started by this process")
