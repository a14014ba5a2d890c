"""execute_command inside bubblewrap vs TOOLHUB_COMMAND_SANDBOX=off, side by side in one run (ratios)."""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time
from pathlib import Path

from _common import summary

from tools_app.runtime.builtins import BuiltinContext, invoke_builtin
from tools_app.runtime.sandbox import SandboxPolicy


def measure(ctx: BuiltinContext, command: str, n: int) -> list[float]:
    samples = []
    for _ in range(n):
        started = time.perf_counter()
        result = invoke_builtin("execute_command", "execute_command", {"command": command}, ctx)
        samples.append((time.perf_counter() - started) * 1000)
        assert result.success and result.data["exit_code"] == 0, result
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-n", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = BuiltinContext(tenant_slug="bench", workspace=Path(tmp), command_allowlist=frozenset({"echo", "git"}))
        measure(base, "git init -q", 1)
        for command in ("echo hi", "git status --short"):  # git adds one sandboxed config check per call
            on = measure(base, command, args.n)
            off = measure(dataclasses.replace(base, sandbox=SandboxPolicy(enabled=False)), command, args.n)
            ratio = sorted(on)[len(on) // 2] / sorted(off)[len(off) // 2]
            print(f"{command!r}: sandboxed {summary(on)}")
            print(f"{command!r}: plain     {summary(off)}")
            print(f"{command!r}: p50 ratio sandboxed/plain = {ratio:.1f}x")


if __name__ == "__main__":
    main()
