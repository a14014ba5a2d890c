"""CPU (user + sys) of starting a Django process, for two checkouts alternated (issue 35).

    .venv/bin/python bench/startup_cpu.py --ab /work/main /work/wt/h-startup [--rounds 5]

Each round runs every case once per checkout, the checkouts in turn (A B, then B A), with each checkout's own
`.venv/bin/python` and `config.settings.test`; a case's figure is its best round (the machine's other load only
ever adds). Cases:

- `setup`: `django.setup()` alone (every process that imports the models: workers, commands, test workers);
- `check`: `manage.py check` (what every management command run from a shell does before its work);
- `runner`: `manage.py toolhub_runner --drain none` against a Redis with no runner in it: the runner command's
  whole start (settings, setup, its own checks, its imports, the registry read), exiting before it serves;
- `collect`: `pytest --collect-only -q -p no:randomly` of the whole suite: one test worker's collection.

Needs Redis for `runner` (REDIS_URL, default db 10 of the local server; it only reads). Prints seconds and the
ratio B/A per case.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
from pathlib import Path

CASES: dict[str, list[str]] = {
    "setup": ["-c", "import django; django.setup()"],
    "check": ["manage.py", "check"],
    "runner": ["manage.py", "toolhub_runner", "--drain", "none"],
    "collect": ["-m", "pytest", "--collect-only", "-q", "-p", "no:randomly", "-p", "no:cacheprovider"],
}


def cpu_of(checkout: Path, argv: list[str], env: dict[str, str]) -> float:
    """User + sys seconds of one child process run to its end in `checkout`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([str(checkout / ".venv" / "bin" / "python"), *argv], cwd=checkout, env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ab", nargs=2, type=Path, required=True, metavar=("A", "B"))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cases", default=",".join(CASES))
    args = parser.parse_args()
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.test", "PYTHONDONTWRITEBYTECODE": "",
           "TOOLHUB_RUNNERS": "redis", "TOOLHUB_RUNNER_SECRET": "bench-startup-secret",
           "REDIS_URL": os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/10")}
    env.pop("PYTEST_XDIST_WORKER", None)
    cases = args.cases.split(",")
    best: dict[tuple[str, int], float] = {}
    for round_ in range(args.rounds):
        order = (0, 1) if round_ % 2 == 0 else (1, 0)
        for case in cases:
            for side in order:
                seconds = cpu_of(args.ab[side], CASES[case], env)
                best[case, side] = min(best.get((case, side), seconds), seconds)
        print(f"round {round_ + 1}/{args.rounds} done, load {os.getloadavg()[0]:.2f}", file=sys.stderr)
    for case in cases:
        a, b = best[case, 0], best[case, 1]
        print(f"{case:8s} A {a:6.2f} s  B {b:6.2f} s  B/A {b / a:.2f}")


if __name__ == "__main__":
    main()
