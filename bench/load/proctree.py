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
import threading
import time
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


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of one process so far (None when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def machine_cpu() -> tuple[float, float]:
    """(busy, all) CPU seconds of the whole machine since boot, every core added."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return (sum(values) - values[3] - values[4]) / CLOCK_TICKS, sum(values) / CLOCK_TICKS


class CpuMeter:
    """CPU seconds spent by each class of the topology's processes (web workers, runners, sandboxed servers, Celery,
    PostgreSQL, Redis, the load generator) between `start()` and `stop()`, sampled every `every_s` so processes that
    come or go in between are counted for the time they were seen. `extra` names more roots: {class: pid}."""

    def __init__(self, topology: Topology, extra: dict[str, int], every_s: float = 1.0) -> None:
        self.topology, self.extra, self.every_s = topology, extra, every_s
        self._first: dict[int, tuple[str, float]] = {}
        self._last: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._machine = (0.0, 0.0)

    def _classes(self) -> dict[int, str]:
        procs = snapshot()
        out: dict[int, str] = {}
        runners = set(self.topology.runners())
        # The supervisor's children: gunicorn masters (their workers), runners, Celery worker and beat.
        for pid in children(procs, self.topology.supervisor):
            args = " ".join(argv(pid))
            if "gunicorn" in args:
                out[pid] = "web (masters)"
                for worker in children(procs, pid):
                    out[worker] = "web workers"
                    for below in descendants(procs, worker):
                        out[below] = "MCP servers (sandboxed)"
            elif pid in runners:
                out[pid] = "runners"
                for below in descendants(procs, pid):
                    out[below] = "MCP servers (sandboxed)"
            else:
                out[pid] = "celery" if "celery" in args else "other"
                for below in descendants(procs, pid):
                    out[below] = out[pid]
        for name, root in self.extra.items():
            out[root] = name
            for below in descendants(procs, root):
                out[below] = name
        return out

    def _sample(self) -> None:
        for pid, name in self._classes().items():
            spent = cpu_seconds(pid)
            if spent is None:  # gone since the scan: its last sample stands (the load generator has exited by `stop`)
                continue
            if pid not in self._first:
                self._first[pid] = (name, spent)
            self._last[pid] = spent

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s):
            self._sample()

    def start(self) -> CpuMeter:
        self._machine = machine_cpu()
        self._began = time.monotonic()
        self._sample()
        self._thread.start()
        return self

    def stop(self) -> dict[str, float]:
        """CPU seconds per class, plus `wall` (seconds), `machine` (busy CPU seconds of every process on the machine)
        and `capacity` (CPU seconds the machine had)."""
        self._stop.set()
        self._thread.join()
        self._sample()
        out: dict[str, float] = {}
        for pid, (name, first) in self._first.items():
            out[name] = out.get(name, 0.0) + max(0.0, self._last.get(pid, first) - first)
        busy, total = machine_cpu()
        out["wall"] = time.monotonic() - self._began
        out["machine"] = busy - self._machine[0]
        out["capacity"] = total - self._machine[1]
        return out
