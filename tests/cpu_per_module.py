"""Opt-in: where a test process's own CPU goes, per module (`TOOLHUB_TEST_CPU=<folder>`; off otherwise).

Wall seconds (var/test-durations.json) say how long a module kept a worker; on a loaded 2-core machine they grow with
everyone else's load. CPU seconds do not: `time.process_time()` of the pytest process (every thread of it) around each
test's setup, call and teardown, summed per module, plus the CPU of the child processes it reaped in that time
(`RUSAGE_CHILDREN`: servers and installers a test or a module fixture started and waited for; a child still running
when the test ends is not counted, nor are grandchildren their parent did not wait for). Session fixtures (the test
database, a session's servers) count against the module whose test first needed them.

Each process writes `<folder>/<worker>-<pid>.json` (again at the end of each module); `python -m tests.cpu_per_module <folder>`
adds them up and prints the modules by CPU.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from collections.abc import Generator
from pathlib import Path

import pytest

ENV = "TOOLHUB_TEST_CPU"


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class CpuPerModule:
    """The pytest plugin: {module: {"cpu": s, "children_cpu": s, "wall": s, "tests": n}} of this process."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.modules: dict[str, dict[str, float]] = {}

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None]:
        cpu, children, wall = time.process_time(), _children_cpu(), time.perf_counter()
        yield
        row = self.modules.setdefault(item.nodeid.split("::", 1)[0],
                                      {"cpu": 0.0, "children_cpu": 0.0, "wall": 0.0, "tests": 0})
        row["cpu"] += time.process_time() - cpu
        row["children_cpu"] += _children_cpu() - children
        row["wall"] += time.perf_counter() - wall
        row["tests"] += 1
        if nextitem is None or nextitem.nodeid.split("::", 1)[0] != item.nodeid.split("::", 1)[0]:
            self.write()  # at each module's end: a run stopped halfway still tells what it measured

    def write(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        name = f"{os.environ.get('PYTEST_XDIST_WORKER', 'main')}-{os.getpid()}.json"
        rounded = {m: {k: round(v, 3) for k, v in row.items()} for m, row in self.modules.items()}
        (self.folder / name).write_text(json.dumps(rounded, indent=1, sort_keys=True) + "\n")


def register(config: pytest.Config) -> None:
    """Turn the plugin on when TOOLHUB_TEST_CPU names a folder (tests/conftest.py's pytest_configure)."""
    folder = os.environ.get(ENV)
    if folder and not config.pluginmanager.has_plugin("toolhub-cpu-per-module"):
        config.pluginmanager.register(CpuPerModule(Path(folder)), "toolhub-cpu-per-module")


def summary(folder: Path) -> list[tuple[str, dict[str, float]]]:
    """Every process's file in `folder` added up per module, most CPU first."""
    total: dict[str, dict[str, float]] = {}
    for path in sorted(folder.glob("*.json")):
        for module, row in json.loads(path.read_text()).items():
            into = total.setdefault(module, {"cpu": 0.0, "children_cpu": 0.0, "wall": 0.0, "tests": 0})
            for key, value in row.items():
                into[key] = into.get(key, 0.0) + float(value)
    return sorted(total.items(), key=lambda kv: -kv[1]["cpu"])


def main(argv: list[str]) -> int:
    rows = summary(Path(argv[0] if argv else os.environ.get(ENV, "var/test-cpu")))
    print(f"{'cpu s':>8} {'child s':>8} {'wall s':>8} {'tests':>5}  module")
    for module, row in rows:
        print(f"{row['cpu']:8.2f} {row['children_cpu']:8.2f} {row['wall']:8.2f} {int(row['tests']):5d}  {module}")
    if rows:
        cpu, children, wall = (sum(r[k] for _, r in rows) for k in ("cpu", "children_cpu", "wall"))
        print(f"{cpu:8.2f} {children:8.2f} {wall:8.2f}        total of {len(rows)} modules")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
