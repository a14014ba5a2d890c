"""execute_command: allowlisted programs, no shell, argument rules, an OS sandbox, tail-only output."""

from __future__ import annotations

import os
import re
import selectors
import shlex
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from pydantic import Field

from tools_app.runtime.builtins.command_rules import (
    INTERPRETERS,
    PIP_WITHOUT_PYTHON,
    RULES,
    SHELL_METACHARACTERS,
    ProgramRules,
)
from tools_app.runtime.builtins.context import BuiltinContext
from tools_app.runtime.builtins.hardening import (
    GIT_DRIVER_KEYS_REGEX,
    git_driver_overrides,
    git_global_args,
    harden_argv,
    program_env,
)
from tools_app.runtime.builtins.registry import BuiltinArgs, Safety, builtin
from tools_app.runtime.builtins.workspace import Workspace
from tools_app.runtime.cgroups import memory_cgroup
from tools_app.runtime.errors import BusinessError, InvalidParams, ToolTimeout
from tools_app.runtime.procenv import (
    base_environment,
    descendant_pids,
    end_processes,
    identities_of,
    kill_process_group,
)
from tools_app.runtime.result import ToolResult
from tools_app.runtime.sandbox import (
    INSTALL_HINT,
    SandboxUnavailable,
    bwrap_argv,
    check_available,
    limits_preexec,
    sandbox_env,
)

MAX_COMMAND_CHARS = 4096
GIT_CONFIG_QUERY_TIMEOUT_S = 10.0
_URL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")


class ExecuteCommandArgs(BuiltinArgs):
    command: str = Field(description="One allowlisted program and its arguments; no shell syntax")


@builtin(
    name="execute_command",
    description="Run one allowlisted program (no shell) in the workspace, inside an OS sandbox (no network); "
    "30 s timeout; returns the exit code and the last 8 KiB of output.",
    safety=Safety.DESTRUCTIVE,
)
def execute_command(args: ExecuteCommandArgs, ctx: BuiltinContext) -> ToolResult:
    ws = Workspace(ctx.workspace)
    argv = check_command(args.command, ctx, ws)
    program = argv[0]
    rules = RULES.get(program)
    sub_at = subcommand_index(argv[1:], rules) if rules else None
    runner = CommandRunner(ctx, ws)
    executable = runner.which(program)
    git_extra: tuple[tuple[str, str], ...] = ()
    if program == "git":
        git_extra = _git_driver_overrides(runner, executable, argv, sub_at)
    run = runner.run(
        harden_argv(program, [executable, *argv[1:]], sub_at),
        program_env(program, ws.root, git_extra),
        timeout_s=ctx.command_timeout_s,
        cap=ctx.output_cap_bytes,
    )
    if run.timed_out:
        raise ToolTimeout(
            f"command {argv[0]!r} timed out after {ctx.command_timeout_s:g} s; its process group was killed",
            details={"stdout_tail": run.stdout, "stderr_tail": run.stderr},
        )
    parts = [f"exit code {run.exit_code}"]
    if run.stdout:
        parts.append(("[stdout, last bytes]\n" if run.stdout_truncated else "[stdout]\n") + run.stdout)
    if run.stderr:
        parts.append(("[stderr, last bytes]\n" if run.stderr_truncated else "[stderr]\n") + run.stderr)
    return ToolResult.ok(
        data={
            "exit_code": run.exit_code,
            "stdout": run.stdout,
            "stderr": run.stderr,
            "stdout_truncated": run.stdout_truncated,
            "stderr_truncated": run.stderr_truncated,
            "sandboxed": runner.sandboxed,
        },
        text="\n".join(parts),
    )


def _git_driver_overrides(
    runner: CommandRunner, executable: str, argv: list[str], sub_at: int | None
) -> tuple[tuple[str, str], ...]:
    """Ask the repository (same sandbox, same hardening) which program-naming keys it sets."""
    query = [executable, *git_global_args(argv[1:], sub_at), "config", "--name-only", "--get-regexp",
             GIT_DRIVER_KEYS_REGEX]
    run = runner.run(query, program_env("git", runner.ws.root), timeout_s=GIT_CONFIG_QUERY_TIMEOUT_S, cap=1 << 20)
    if run.timed_out or run.stdout_truncated:
        raise InvalidParams("git: the repository's config could not be checked (rule: it must be readable)")
    if run.exit_code != 0:  # 1: no such key; 128: not a repository (git init, clone)
        return ()
    return git_driver_overrides([line.strip() for line in run.stdout.splitlines() if line.strip()])


class CommandRunner:
    """Runs a checked argv in the workspace: inside bubblewrap, or plain when the operator turned it off."""

    def __init__(self, ctx: BuiltinContext, ws: Workspace) -> None:
        self.policy = ctx.sandbox
        self.ws = ws
        # Checked before anything runs: no sandbox means no command, never an unsandboxed one.
        self.bwrap = check_available(self.policy) if self.policy.enabled else None
        tenant = str(ctx.tenant_id if ctx.tenant_id is not None else ctx.tenant_slug)
        self.cgroup = memory_cgroup(tenant, self.policy.tenant_memory_bytes,
                                    configured=self.policy.cgroup_root) if self.bwrap else None
        if self.bwrap and self.policy.tenant_memory_bytes > 0 and self.cgroup is None:
            # Per-process rlimits alone let a command hold memory many times over in its children: without the
            # tenant's total cap the command does not run.
            raise SandboxUnavailable(
                f"execute_command runs only under the tenant's total memory cap "
                f"({self.policy.tenant_memory_bytes >> 20} MiB), and no writable memory cgroup is available to hold "
                f"it{f' at TOOLHUB_SANDBOX_CGROUP={self.policy.cgroup_root!r}' if self.policy.cgroup_root else ''}: "
                "name a writable (on cgroup v2, delegated) cgroup in TOOLHUB_SANDBOX_CGROUP, or, accepting that a "
                "command's processes are capped only one by one, set TOOLHUB_SANDBOX_TENANT_MEMORY_MB=0",
                details={"setting": "TOOLHUB_SANDBOX_CGROUP", "cgroup": self.policy.cgroup_root,
                         "tenant_memory_bytes": self.policy.tenant_memory_bytes},
            )

    @property
    def sandboxed(self) -> bool:
        return self.bwrap is not None

    def which(self, program: str) -> str:
        path = self.policy.search_path() if self.sandboxed else base_environment().get("PATH")
        executable = shutil.which(program, path=path)
        if executable is None:
            where = "inside the command sandbox" if self.sandboxed else "on this host"
            raise BusinessError(f"program {program!r} is allowlisted but not installed {where}")
        return executable

    def run(self, argv: list[str], extra_env: Mapping[str, str], *, timeout_s: float, cap: int) -> CappedRun:
        if self.bwrap is None:
            return run_capped(argv, cwd=self.ws.root, timeout_s=timeout_s, cap=cap, env=base_environment(extra_env))
        info_r, info_w = os.pipe()
        try:
            full = bwrap_argv(
                self.policy,
                bwrap=self.bwrap,
                workspace=self.ws.root,
                argv=argv,
                env=sandbox_env(self.policy, extra_env),
                info_fd=info_w,
            )
            run = run_capped(
                full,
                cwd=self.ws.root,
                timeout_s=timeout_s,
                cap=cap,
                env={"PATH": os.defpath, "LANG": "C.UTF-8"},
                preexec_fn=limits_preexec(self.policy, timeout_s, self.cgroup.procs if self.cgroup else None),
                pass_fds=(info_w,),
                after_start=lambda: os.close(info_w),
            )
            info = _read_available(info_r)
        finally:
            for fd in (info_r, info_w):
                try:
                    os.close(fd)
                except OSError:
                    pass
        if not info and not run.timed_out and run.exit_code != 0:
            # bwrap reports on stderr and exits before starting the program (no info written).
            raise SandboxUnavailable(
                f"execute_command's sandbox (bubblewrap) could not start: {run.stderr.strip()[-500:]}; {INSTALL_HINT}",
                details={"bwrap": self.bwrap, "install": "apt-get install bubblewrap"},
            )
        return run


def _read_available(fd: int) -> bytes:
    os.set_blocking(fd, False)
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


# -- checks ---------------------------------------------------------------------------------------


def check_command(command: str, ctx: BuiltinContext, ws: Workspace) -> list[str]:
    """Split `command` into argv and apply every rule; raise InvalidParams naming the broken rule."""
    if len(command) > MAX_COMMAND_CHARS:
        raise InvalidParams(f"command is longer than {MAX_COMMAND_CHARS} characters")
    for char in SHELL_METACHARACTERS:
        if char in command:
            shown = {"\n": "newline", "\r": "carriage return", "\x00": "NUL"}.get(char, char)
            raise InvalidParams(
                f"command contains the shell metacharacter {shown!r} (rule: no shell syntax; "
                "; | & ` $ ( ) < > and line breaks are refused)"
            )
    try:
        argv = shlex.split(command, posix=True)
    except ValueError as exc:
        raise InvalidParams(f"command cannot be split into arguments: {exc}") from None
    if not argv:
        raise InvalidParams("command is empty")
    program = argv[0]
    if "/" in program or "\\" in program or program != os.path.basename(program):
        raise InvalidParams(f"program {program!r} must be a bare allowlisted name, not a path")
    if program not in ctx.command_allowlist:
        raise InvalidParams(
            f"program {program!r} is not in the command allowlist; allowed: {', '.join(sorted(ctx.command_allowlist))}"
        )
    if program in INTERPRETERS and program not in ctx.interpreters_allowed:
        raise InvalidParams(
            f"program {program!r} is an interpreter and needs a per-tenant opt-in (interpreters_allowed)"
        )
    rules = RULES.get(program)
    if program == "pip" and not ctx.interpreters_allowed & {"python", "python3"}:
        rules = PIP_WITHOUT_PYTHON
        sub = subcommand_index(argv[1:], rules)
        if sub is not None and argv[1 + sub] not in (rules.allowed_subcommands or ()):
            raise InvalidParams(
                f"pip: {argv[1 + sub]!r} runs the package's own code (setup.py, build backends) and needs the "
                f"tenant's python opt-in (interpreters_allowed); without it pip may run: "
                f"{', '.join(sorted(rules.allowed_subcommands or ()))}")
    if rules is not None:
        _check_rules(program, argv[1:], rules)
    _check_paths(argv[1:], ws, rules)
    return argv


def _option_name(arg: str) -> str:
    return arg.split("=", 1)[0]


def _matches(name: str, forbidden: frozenset[str], abbreviations: bool) -> str | None:
    if name in forbidden:
        return name
    if abbreviations and name.startswith("--") and len(name) > 3:
        for option in forbidden:
            if option.startswith("--") and option.startswith(name):
                return option
    return None


def subcommand_index(args: list[str], rules: ProgramRules) -> int | None:
    """Index in `args` of the subcommand: the first non-option that is no path option's value."""
    for index, arg in enumerate(args):
        if not arg.startswith("-") and (args[index - 1] if index else "") not in rules.path_options:
            return index
    return None


def _check_rules(program: str, args: list[str], rules: ProgramRules) -> None:
    subcommand: str | None = None
    for index, arg in enumerate(args):
        refused = _refusal(program, arg, rules, subcommand)
        if refused:
            raise InvalidParams(f"{program}: {refused}")
        if subcommand is None and not arg.startswith("-"):
            previous = args[index - 1] if index else ""
            if previous not in rules.path_options:
                subcommand = arg
                if arg in rules.forbidden_subcommands:
                    raise InvalidParams(
                        f"{program}: subcommand {arg!r} is not allowed (rule: it can run "
                        "arbitrary commands, package scripts or change configuration)"
                    )
                if rules.allowed_subcommands is not None and arg not in rules.allowed_subcommands:
                    raise InvalidParams(
                        f"{program}: {arg!r} is not an allowed {program} subcommand (rule: builtin "
                        "subcommands only; aliases, scripts and external programs are refused)"
                    )
                read_rule = rules.read_only_subcommands.get(arg)
                if read_rule is not None:
                    _check_read_only(program, arg, args[index + 1 :], read_rule)


def _refusal(program: str, arg: str, rules: ProgramRules, subcommand: str | None) -> str | None:
    for prefix in rules.forbidden_prefixes:
        if arg.startswith(prefix):
            return f"argument {arg!r} is refused (rule: no {prefix!r} arguments)"
    if not arg.startswith("-") or arg in ("-", "--"):
        return f"argument {arg!r} is refused (rule: no {arg!r})" if arg in rules.forbidden_options else None
    name = _option_name(arg)
    hit = _matches(name, rules.forbidden_options, rules.abbreviations)
    if hit:
        return (
            f"option {hit!r} is refused (rule: it can run code, write outside the workspace or change config)"
        )
    if subcommand is not None:
        hit = _matches(name, rules.subcommand_options.get(subcommand, frozenset()), rules.abbreviations)
        if hit:
            return f"option {hit!r} of {subcommand!r} is refused (rule: it can run commands or reach outside)"
    if rules.forbidden_short_letters and re.fullmatch(r"-[A-Za-z]{2,}", arg):
        bad = [c for c in arg[1:] if c in rules.forbidden_short_letters]
        if bad:
            return f"option cluster {arg!r} contains '-{bad[0]}' (rule: no inline-code flags)"
    return None


def _check_read_only(
    program: str, sub: str, rest: list[str], rule: tuple[frozenset[str], frozenset[str]]
) -> None:
    reads, modifiers = rule
    allowed = reads | modifiers
    options = [a for a in rest if a.startswith("-")]
    has_read = any(_option_name(a) in reads for a in options) or (bool(rest) and rest[0] in reads)
    if not has_read or any(_option_name(a) not in allowed for a in options):
        raise InvalidParams(
            f"{program} {sub}: only reading is allowed (rule: `{program} {sub}` writes are refused; "
            f"use one of {', '.join(sorted(reads))})"
        )


def _check_paths(args: list[str], ws: Workspace, rules: ProgramRules | None) -> None:
    path_options = rules.path_options if rules else frozenset()
    for index, arg in enumerate(args):
        previous = args[index - 1] if index else ""
        candidate = _path_candidate(arg)
        if candidate is None or (_URL.match(candidate) and not candidate.lower().startswith("file:")):
            continue
        path_like = "/" in candidate or "\\" in candidate or ".." in candidate or candidate.startswith("~")
        if not (path_like or previous in path_options or os.path.lexists(ws.root / candidate)):
            continue
        if "\x00" in candidate:
            raise InvalidParams("argument contains a NUL byte")
        real = Path(os.path.realpath(ws.root / candidate))
        if real != ws.root and not real.is_relative_to(ws.root):
            raise InvalidParams(
                f"argument {arg!r} names a path outside the workspace (rule: path arguments must stay inside it)"
            )


def _path_candidate(arg: str) -> str | None:
    """What of an argument may name a path: all of it, an option's `=value`, a short option's glued value
    (`-I../x`), or nothing (any other option)."""
    if not arg.startswith("-") or arg in ("-", "--"):
        return arg
    if "=" in arg:
        return arg.split("=", 1)[1]
    if not arg.startswith("--") and len(arg) > 2 and ("/" in arg or ".." in arg):
        return arg[2:]
    return None


# -- running --------------------------------------------------------------------------------------


@dataclass
class CappedRun:
    exit_code: int | None
    stdout: str
    stderr: str
    stdout_truncated: bool
    stderr_truncated: bool
    timed_out: bool


class _Tail:
    """Keeps only the last `cap` bytes of a stream, whatever its size."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.buf = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        self.buf += chunk[-self.cap :]
        if len(self.buf) > self.cap:
            del self.buf[: len(self.buf) - self.cap]

    def text(self) -> str:
        return bytes(self.buf).decode("utf-8", errors="replace")


def run_capped(
    argv: list[str],
    *,
    cwd: Path,
    timeout_s: float,
    cap: int,
    env: Mapping[str, str] | None = None,
    preexec_fn: Callable[[], None] | None = None,
    pass_fds: tuple[int, ...] = (),
    after_start: Callable[[], None] | None = None,
) -> CappedRun:
    """Run argv in its own session, streaming both pipes into tails; kill the group on timeout."""
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=dict(env) if env is not None else base_environment(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        close_fds=True,
        pass_fds=pass_fds,
        preexec_fn=preexec_fn,
    )
    if after_start is not None:
        after_start()
    tails = {"stdout": _Tail(cap), "stderr": _Tail(cap)}
    deadline = time.monotonic() + timeout_s
    timed_out = False
    assert proc.stdout is not None and proc.stderr is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ, "stdout")
        sel.register(proc.stderr, selectors.EVENT_READ, "stderr")
        try:
            while sel.get_map():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    timed_out = True
                    break
                for key, _ in sel.select(timeout=min(remaining, 0.5)):
                    chunk = os.read(key.fd, 65536)
                    if chunk:
                        tails[key.data].feed(chunk)
                    else:
                        sel.unregister(key.fileobj)
            if not timed_out:
                try:
                    proc.wait(timeout=max(deadline - time.monotonic(), 0.01))
                except subprocess.TimeoutExpired:
                    timed_out = True
        finally:
            # bwrap runs the command in a session of its own (--new-session), out of the group's reach, and
            # --die-with-parent ends it only some time after bwrap: while bwrap still runs (a timeout, an error
            # here), note its tree now and end what is left of it after. Once bwrap exited by itself, its pid
            # namespace, and everything in it, is gone already.
            tree = identities_of(descendant_pids(proc.pid)) if proc.poll() is None else set()
            if timed_out:
                kill_process_group(proc.pid, term_wait_s=1.0)
            else:
                # The leader exited; anything it left running in its group must not outlive the call.
                kill_process_group(proc.pid, term_wait_s=0.2)
            end_processes(tree)
            proc.stdout.close()
            proc.stderr.close()
            proc.wait()
    out, err = tails["stdout"], tails["stderr"]
    return CappedRun(
        exit_code=None if timed_out else proc.returncode,
        stdout=out.text(),
        stderr=err.text(),
        stdout_truncated=out.total > cap,
        stderr_truncated=err.total > cap,
        timed_out=timed_out,
    )
