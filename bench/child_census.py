"""Which child processes a command (a pytest run) starts, and the CPU each of them spends.

    .venv/bin/python bench/child_census.py [--out census.json] [--every 0.02] -- <command...>

With `-p bench._census_plugin` on the pytest command line, a child whose environment does not name its test is
put down to the test running when it was first seen.

Runs the command in a cpuacct cgroup of its own (as /work/wt/cpu.sh does), samples the cgroup's processes every
`--every` seconds (utime + stime of /proc/<pid>/stat, the process's threads and the dead ones included) and notes, for
each process seen, its command line, its parent and the test it was started for (PYTEST_CURRENT_TEST of its initial
environment, else its parent's). A process's last sample is its CPU: what it spends between the last sample and its
end is missed (so are processes that live less than one interval), hence the cgroup's own total beside the sum.

Prints the cgroup's CPU, the sampled CPU of the pytest processes and of the other processes, then the children by kind
(the script a python runs, node's script, a PyPI server's entry point...) and by test module. Measurement only: the
sampler runs outside the cgroup, and its own CPU is not counted.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path("/sys/fs/cgroup/cpuacct")
TICK = os.sysconf("SC_CLK_TCK")


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def _stat(pid: int) -> tuple[int, float] | None:
    raw = _read(f"/proc/{pid}/stat")
    if raw is None:
        return None
    rest = raw[raw.rindex(b")") + 2:].split()
    return int(rest[1]), (int(rest[11]) + int(rest[12])) / TICK  # ppid, utime + stime


def _test_of(pid: int) -> str | None:
    raw = _read(f"/proc/{pid}/environ") or b""
    for item in raw.split(b"\0"):
        if item.startswith(b"PYTEST_CURRENT_TEST="):
            return item.split(b"=", 1)[1].decode(errors="replace").split(" ")[0]
    return None


def kind(argv: list[str]) -> str:
    """A short name for what a process runs: the script or module of a python, node's script, the program else."""
    if not argv:
        return "?"
    prog = os.path.basename(argv[0])
    if prog.startswith("python") or prog == "uv":
        args = [a for a in argv[1:] if not a.startswith("-") or a in ("-m", "-c")]
        if args[:1] == ["-m"] and len(args) > 1:
            return f"python -m {args[1]}"
        if args[:1] == ["-c"]:
            code = argv[argv.index("-c") + 1] if "-c" in argv else ""
            if "execnet" in code or "exec(eval(sys.stdin.readline()))" in code:
                return "pytest worker"
            return "python -c " + code[:50].replace("\n", " ")
        if args:
            script = args[0]
            parts = Path(script).parts
            return "python " + "/".join(parts[-2:])
        return "python"
    if prog == "node" or prog.endswith("node"):
        scripts = [a for a in argv[1:] if not a.startswith("-")]
        return "node " + ("/".join(Path(scripts[0]).parts[-3:]) if scripts else "")
    if prog in ("bwrap", "slirp4netns", "sh", "bash", "npm", "npx", "git", "uvx"):
        return prog
    return prog


CURRENT = Path(os.environ.setdefault("TOOLHUB_CENSUS_CURRENT", f"/tmp/census-current-{os.getpid()}"))


def _current() -> str | None:
    raw = _read(str(CURRENT))
    return raw.decode(errors="replace") if raw else None


def sample(cg: Path, seen: dict[int, dict]) -> None:
    raw = _read(str(cg / "cgroup.procs")) or b""
    for line in raw.split():
        pid = int(line)
        st = _stat(pid)
        if st is None:
            continue
        ppid, cpu = st
        # read again each time: a child seen between its fork and its exec shows its parent's command line
        argv = [a.decode(errors="replace") for a in (_read(f"/proc/{pid}/cmdline") or b"").split(b"\0") if a]
        rec = seen.get(pid)
        if rec is None:
            rec = seen[pid] = {"pid": pid, "ppid": ppid, "argv": argv, "test": _test_of(pid) or _current(), "cpu": cpu,
                               "first": time.monotonic()}
        else:
            if argv and argv != rec["argv"]:  # it exec'd: another program, maybe another environment
                rec["argv"], rec["test"] = argv, _test_of(pid) or rec["test"]
            rec["cpu"] = max(rec["cpu"], cpu)
        rec["last"] = time.monotonic()


def _pytest_pids(seen: dict[int, dict]) -> set[int]:
    """The pytest processes (the run and its xdist workers); every record gets its kind."""
    pids = set()
    for pid, rec in seen.items():
        rec["kind"] = kind(rec["argv"])
        if rec["kind"] == "pytest worker" or any("pytest" in a for a in rec["argv"][:4]):
            pids.add(pid)
    return pids


def _attribute(seen: dict[int, dict], pytest_pids: set[int]) -> None:
    """A fork of the zygote (the zygote's cmdline) is named by its parent; a child without a test takes its parent's."""
    for rec in seen.values():
        parent = seen.get(rec["ppid"])
        if parent is not None and parent["argv"] == rec["argv"] and "zygote" in " ".join(rec["argv"]):
            rec["kind"] = "zygote fork"
    for rec in sorted(seen.values(), key=lambda r: r["first"]):
        if rec["test"] is None and rec["pid"] not in pytest_pids:
            parent = seen.get(rec["ppid"])
            rec["test"] = parent["test"] if parent is not None and parent["pid"] not in pytest_pids else None


def _table(title: str, kids: list[dict], key: Any, top: int) -> None:
    rows: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    for r in kids:
        rows[key(r)][0] += 1
        rows[key(r)][1] += r["cpu"]
    print(f"\n{title}: processes, CPU s")
    for name, (n, c) in sorted(rows.items(), key=lambda x: -x[1][1])[:top]:
        print(f"  {n:5d} {c:7.1f}  {name}")


def report(seen: dict[int, dict], total: float, wall: float) -> None:
    pytest_pids = _pytest_pids(seen)
    _attribute(seen, pytest_pids)
    own = sum(seen[p]["cpu"] for p in pytest_pids)
    kids = [r for p, r in seen.items() if p not in pytest_pids]
    print(f"cgroup CPU {total:.1f} s (wall {wall:.1f} s); sampled: pytest processes {own:.1f} s, "
          f"{len(kids)} other processes {sum(r['cpu'] for r in kids):.1f} s")
    _table("by kind", kids, lambda r: r["kind"], 40)
    _table("by test module", kids, lambda r: (r["test"] or "?").split("::")[0], 60)
    _table("by test", kids, lambda r: (r["test"] or "?").split("::", 1)[-1][:100], 20)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=None)
    parser.add_argument("--every", type=float, default=0.02)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    cg = ROOT / f"census-{os.getpid()}"
    cg.mkdir()
    seen: dict[int, dict] = {}
    start = time.monotonic()
    proc = subprocess.Popen(command, preexec_fn=lambda: (cg / "cgroup.procs").write_text(str(os.getpid())))
    while proc.poll() is None:
        sample(cg, seen)
        time.sleep(args.every)
    # daemonised leftovers: sample until the cgroup is empty (at most 5 s)
    deadline = time.monotonic() + 5
    while (_read(str(cg / "cgroup.procs")) or b"").strip() and time.monotonic() < deadline:
        sample(cg, seen)
        time.sleep(args.every)
    wall = time.monotonic() - start
    total = int((_read(str(cg / "cpuacct.usage")) or b"0").strip()) / 1e9
    for line in (_read(str(cg / "cgroup.procs")) or b"").split():
        (ROOT / "cgroup.procs").write_text(line.decode())
    try:
        cg.rmdir()
    except OSError:
        pass
    report(seen, total, wall)
    if args.out:
        Path(args.out).write_text(json.dumps({"total": total, "wall": wall, "procs": list(seen.values())}, indent=1))
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
