"""execute_command: the refusal corpus, path confinement, tail-only output and process-group timeout."""

from __future__ import annotations

import dataclasses
import os
import shutil
from pathlib import Path

import pytest

from tests.waiting import wait_until
from tools_app.runtime.builtins import BuiltinContext, invoke_builtin
from tools_app.runtime.builtins.command_rules import DEFAULT_ALLOWLIST, INTERPRETERS, RUOYI_ALLOWLIST

from .conftest import snapshot

# (id, command, rule fragment). Every one must be refused with INVALID_PARAMS before anything runs.
REFUSED = [
    ("git-c-fsmonitor", "git -c core.fsmonitor=touch_pwned status", "'-c'"),
    ("git-c-glued", "git -ccore.fsmonitor=x status", "'-c'"),
    ("git-config-env", "git --config-env=core.pager=X log", "--config-env"),
    ("git-diff-output", "git diff --output=../outside/pwned", "--output"),
    ("git-diff-output-abbrev", "git diff --outp=pwned.txt", "--output"),
    ("git-exec-path", "git --exec-path=. status", "--exec-path"),
    ("git-upload-pack", "git fetch --upload-pack=touch origin", "--upload-pack"),
    ("git-clone-u", "git clone -u touch repo dest", "'-u'"),
    ("git-receive-pack", "git push --receive-pack=x origin", "--receive-pack"),
    ("git-C-outside", "git -C /tmp status", "outside the workspace"),
    ("git-C-dotdot", "git -C .. status", "outside the workspace"),
    ("git-config-write", "git config core.hooksPath hooks", "only reading"),
    ("git-config-local-write", "git config --local core.fsmonitor x", "only reading"),
    ("git-config-set", "git config set core.pager x", "only reading"),
    ("git-ext-transport", "git clone ext::sh repo", "ext::"),
    ("git-file-url", "git clone file:///etc repo", "file:"),
    ("git-rebase-exec", "git rebase --exec=true main", "--exec"),
    ("git-rebase-x", "git rebase -x true main", "'-x'"),
    ("git-grep-pager", "git grep -Ocat foo", "'-O'"),
    ("git-submodule", "git submodule foreach true", "submodule"),
    ("git-bisect-run", "git bisect run true", "bisect"),
    ("git-work-tree", "git --work-tree=. status", "--work-tree"),
    ("find-exec", "find . -exec rm {} +", "not in the command allowlist"),
    ("sh", "sh -c id", "not in the command allowlist"),
    ("absolute-program", "/bin/echo hi", "bare allowlisted name"),
    ("relative-program", "./echo hi", "bare allowlisted name"),
    ("python-c", "python -c print", "not in the command allowlist"),
    ("python3-c", "python3 -c 1", "not in the command allowlist"),
    ("node-e", "node -e 1", "not in the command allowlist"),
    ("java", "java -XX:OnError=id -version", "not in the command allowlist"),
    ("npm-exec", "npm exec cowsay", "'exec'"),
    ("npx-style", "npm x cowsay", "'x'"),
    ("yarn-node", "yarn node script.js", "'node'"),
    ("pnpm-dlx", "pnpm dlx cowsay", "'dlx'"),
    ("npm-script-shell", "npm install --script-shell=/bin/sh", "--script-shell"),
    ("npm-test", "npm test", "'test'"),
    ("npm-run", "npm run build", "'run'"),
    ("npm-start", "npm start", "'start'"),
    ("npm-restart", "npm restart", "'restart'"),
    ("pnpm-script-name", "pnpm build", "not an allowed pnpm subcommand"),
    ("yarn-script-name", "yarn build", "not an allowed yarn subcommand"),
    ("git-alias", "git -C evil pwn", "not an allowed git subcommand"),
    ("git-alias-no-pager", "git --no-pager pwn", "not an allowed git subcommand"),
    ("semicolon", "echo hi; rm -rf .", "';'"),
    ("pipe", "cat hello.txt | tee x", "'|'"),
    ("and", "echo a && echo b", "'&'"),
    ("background", "echo a &", "'&'"),
    ("backticks", "echo `id`", "'`'"),
    ("dollar-paren", "echo $(id)", "'$'"),
    ("dollar-var", "echo $HOME", "'$'"),
    ("redirect-out", "echo x > hello.txt", "'>'"),
    ("redirect-in", "cat < /etc/passwd", "'<'"),
    ("newline", "echo a\nrm -rf .", "newline"),
    ("carriage-return", "echo a\rrm x", "carriage return"),
    ("cat-outside-absolute", "cat /etc/passwd", "outside the workspace"),
    ("cat-dotdot", "cat ../outside/secret.txt", "outside the workspace"),
    ("cat-sibling", "cat ../demo_evil/secret.txt", "outside the workspace"),
    ("cat-option-value", "cat --foo=../outside/secret.txt", "outside the workspace"),
    ("leading-dash-glued-path", "ls -I../outside", "outside the workspace"),
    ("ls-symlink-out", "ls link_out", "outside the workspace"),
    ("after-double-dash", "cat -- ../outside/secret.txt", "outside the workspace"),
    ("dash-prefixed-path", "cat -/../../outside/secret.txt", "outside the workspace"),
    ("git-double-dash-output", "git diff -- --output=x", "--output"),
    ("git-upload-pack-abbrev", "git ls-remote --upload=x origin", "--upload-pack"),
    ("unbalanced-quote", "echo 'abc", "cannot be split"),
    ("empty", "   ", "empty"),
]


@pytest.fixture
def cmd_ctx(ctx: BuiltinContext, layout: dict[str, Path]) -> BuiltinContext:
    (layout["root"] / "link_out").symlink_to(layout["outside"])
    return ctx


@pytest.mark.parametrize(("command", "rule"), [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED])
def test_refusal_corpus(cmd_ctx: BuiltinContext, layout: dict[str, Path], command: str, rule: str) -> None:
    before = {k: snapshot(layout[k]) for k in ("root", "outside", "evil")}
    result = invoke_builtin("execute_command", "execute_command", {"command": command}, cmd_ctx)
    assert result.error_code == "INVALID_PARAMS", result
    assert rule in (result.error or ""), result.error
    assert {k: snapshot(layout[k]) for k in ("root", "outside", "evil")} == before


@pytest.mark.parametrize(
    ("command", "rule"),
    [
        ("python -c 1", "'-c'"),
        ("python -Sc 1", "'-c'"),
        ("python3 -cimport", "'-c'"),
        ("python3 - x", "'-'"),
        ("node -e 1", "'-e'"),
        ("node --eval=1", "--eval"),
        ("node -pe 1", "'-p'"),
        ("node --require ./x.js y.js", "--require"),
        ("java -XX:OnError=id -version", "-XX:OnError"),
        ("java -javaagent:x.jar Main", "-javaagent"),
    ],
)
def test_interpreters_opted_in_still_refuse_inline_code(ctx: BuiltinContext, command: str, rule: str) -> None:
    opted = dataclasses.replace(
        ctx, command_allowlist=RUOYI_ALLOWLIST, interpreters_allowed=frozenset(INTERPRETERS)
    )
    result = invoke_builtin("execute_command", "execute_command", {"command": command}, opted)
    assert result.error_code == "INVALID_PARAMS" and rule in (result.error or ""), result.error


@pytest.mark.parametrize("command", ["python x.py", "python3 -m http.server", "node x.js", "java Main"])
def test_interpreters_need_the_per_tenant_opt_in(ctx: BuiltinContext, command: str) -> None:
    listed = dataclasses.replace(ctx, command_allowlist=RUOYI_ALLOWLIST)
    result = invoke_builtin("execute_command", "execute_command", {"command": command}, listed)
    assert result.error_code == "INVALID_PARAMS" and "opt-in" in (result.error or ""), result.error


@pytest.mark.parametrize("command", ["pip install ./pkg", "pip install -e .", "pip wheel .", "pip download ./pkg",
                                     "pip --verbose install x"])
def test_pip_builds_only_with_the_python_opt_in(ctx: BuiltinContext, command: str) -> None:
    # Installing runs the package's setup.py: code the operator did not allow without the interpreter opt-in.
    listed = dataclasses.replace(ctx, command_allowlist=RUOYI_ALLOWLIST)
    result = invoke_builtin("execute_command", "execute_command", {"command": command}, listed)
    assert result.error_code == "INVALID_PARAMS" and "python opt-in" in (result.error or ""), result.error
    opted = dataclasses.replace(listed, interpreters_allowed=frozenset({"python"}))
    allowed = invoke_builtin("execute_command", "execute_command", {"command": command}, opted)
    assert "python opt-in" not in (allowed.error or ""), allowed.error


def test_pip_may_inspect_without_the_opt_in(ctx: BuiltinContext) -> None:
    listed = dataclasses.replace(ctx, command_allowlist=RUOYI_ALLOWLIST)
    result = invoke_builtin("execute_command", "execute_command", {"command": "pip --version"}, listed)
    assert "opt-in" not in (result.error or ""), result.error


def test_default_allowlist_is_ruoyi_minus_interpreters() -> None:
    assert DEFAULT_ALLOWLIST == RUOYI_ALLOWLIST - {"python", "python3", "node", "java"}
    assert "find" not in DEFAULT_ALLOWLIST and "sh" not in DEFAULT_ALLOWLIST


def test_echo_and_cat_run_in_the_workspace(ctx: BuiltinContext) -> None:
    result = invoke_builtin("execute_command", "execute_command", {"command": "echo 'hi there' x"}, ctx)
    assert result.success and result.data["exit_code"] == 0
    assert result.data["stdout"] == "hi there x\n"
    result = invoke_builtin(
        "execute_command", "execute_command", {"command": "cat hello.txt sub/inner.txt"}, ctx
    )
    assert result.data["stdout"] == "hello world\ninner\n"


def test_nonzero_exit_is_reported(ctx: BuiltinContext) -> None:
    result = invoke_builtin("execute_command", "execute_command", {"command": "cat missing.txt"}, ctx)
    assert result.success and result.data["exit_code"] != 0
    assert "missing.txt" in result.data["stderr"] and "exit code" in result.text


@pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")
def test_git_read_only_use_is_allowed(ctx: BuiltinContext, layout: dict[str, Path]) -> None:
    assert invoke_builtin("execute_command", "execute_command", {"command": "git init -q"}, ctx).success
    result = invoke_builtin(
        "execute_command", "execute_command", {"command": "git config --list --local"}, ctx
    )
    assert result.success and result.data["exit_code"] == 0, result
    result = invoke_builtin("execute_command", "execute_command", {"command": "git status --short"}, ctx)
    assert result.success and "hello.txt" in result.data["stdout"], result


def test_environment_is_the_allowlisted_base(ctx: BuiltinContext, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgresql://secret@db/x")
    test_ctx = dataclasses.replace(ctx, command_allowlist=frozenset({"env"}))
    result = invoke_builtin("execute_command", "execute_command", {"command": "env"}, test_ctx)
    assert result.success and "DATABASE_URL" not in result.data["stdout"]


def test_100_mb_output_keeps_only_the_tail(ctx: BuiltinContext, layout: dict[str, Path]) -> None:
    big = layout["root"] / "big.bin"
    with open(big, "wb") as fh:  # sparse: 100 MB of zeros without writing them
        fh.truncate(100 * 1024 * 1024)
    with open(big, "r+b") as fh:
        fh.seek(-4, os.SEEK_END)
        fh.write(b"END\n")
    result = invoke_builtin("execute_command", "execute_command", {"command": "cat big.bin"}, ctx)
    assert result.success and result.data["exit_code"] == 0
    assert result.data["stdout_truncated"]
    assert len(result.data["stdout"].encode("utf-8")) <= ctx.output_cap_bytes
    assert result.data["stdout"].endswith("END\n")


def test_timeout_kills_the_whole_process_group(ctx: BuiltinContext, layout: dict[str, Path]) -> None:
    test_ctx = dataclasses.replace(ctx, command_allowlist=frozenset({"sleep"}), command_timeout_s=0.5)
    result = invoke_builtin("execute_command", "execute_command", {"command": "sleep 31.25"}, test_ctx)
    # TIMEOUT, not the sleep's exit 0: the call did not wait for it; and the sleep is gone, not left behind.
    assert result.error_code == "TIMEOUT" and "timed out" in (result.error or "")
    assert not _running(["sleep", "31.25"])


def _running(argv_tail: list[str]) -> bool:
    """Whether any process's argv ends with `argv_tail` (scans /proc; no shell)."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            raw = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        argv = [
            os.path.basename(a) if i == 0 else a
            for i, a in enumerate(raw.decode(errors="replace").split("\0")[:-1])
        ]
        if argv[-len(argv_tail) :] == argv_tail and argv and argv[0] == argv_tail[0]:
            return True
    return False


def test_yes_is_cut_by_the_timeout_with_bounded_memory(ctx: BuiltinContext) -> None:
    test_ctx = dataclasses.replace(ctx, command_allowlist=frozenset({"yes"}), command_timeout_s=0.5)
    result = invoke_builtin("execute_command", "execute_command", {"command": "yes spam"}, test_ctx)
    assert result.error_code == "TIMEOUT"
    assert len(result.meta["details"]["stdout_tail"]) <= ctx.output_cap_bytes


@pytest.mark.skipif(shutil.which("xargs") is None, reason="xargs not installed")
def test_timeout_kills_grandchildren_too(ctx: BuiltinContext, layout: dict[str, Path]) -> None:
    (layout["root"] / "args.txt").write_text("31.75\n")
    test_ctx = dataclasses.replace(ctx, command_allowlist=frozenset({"xargs"}), command_timeout_s=0.5)
    result = invoke_builtin(
        "execute_command", "execute_command", {"command": "xargs -a args.txt sleep"}, test_ctx
    )
    assert result.error_code == "TIMEOUT"
    assert wait_until(lambda: not _running(["sleep", "31.75"])), "a grandchild outlived the timeout"
