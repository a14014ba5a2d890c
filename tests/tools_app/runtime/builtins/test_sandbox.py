"""execute_command's trust boundary: the git alias escape, no network, no writes outside, sandbox on/off/missing."""

from __future__ import annotations

import dataclasses
import os
import shutil
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tools_app.runtime.builtins import BuiltinContext, invoke_builtin
from tools_app.runtime.cgroups import cgroup_root
from tools_app.runtime.sandbox import SandboxPolicy

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")
needs_bwrap = pytest.mark.skipif(
    not os.access(SandboxPolicy().bwrap, os.X_OK), reason="bubblewrap not installed (apt-get install bubblewrap)"
)


def run(ctx: BuiltinContext, command: str) -> Any:
    return invoke_builtin("execute_command", "execute_command", {"command": command}, ctx)


def write(ctx: BuiltinContext, path: str, content: str) -> None:
    result = invoke_builtin("write_file", "write_file", {"path": path, "content": content}, ctx)
    assert result.success, result


def found_anywhere(name: str, *roots: Path) -> list[Path]:
    hits = [p for root in roots for p in root.rglob(name)]
    return hits + [p for p in (Path.cwd() / name,) if p.exists()]


@needs_git
@needs_bwrap
def test_the_git_alias_escape_from_the_issue_is_refused(ctx: BuiltinContext, layout: dict[str, Path]) -> None:
    assert run(ctx, "git init -q --bare evil").success
    write(ctx, "evil/config", '[core]\n\trepositoryformatversion = 0\n\tbare = true\n[alias]\n\tpwn = "!id > owned.txt"\n')
    result = run(ctx, "git -C evil pwn")
    assert result.error_code == "INVALID_PARAMS", result
    assert "builtin subcommands only" in (result.error or "")
    assert found_anywhere("owned.txt", layout["tmp"]) == []


@needs_git
@needs_bwrap
def test_repository_config_cannot_choose_programs(ctx: BuiltinContext, layout: dict[str, Path]) -> None:
    root = layout["root"]
    assert run(ctx, "git init -q work").success
    write(ctx, "work/a.txt", "one\n")
    write(ctx, "work/.gitattributes", "*.txt filter=evil\n")
    hooks = root / "work" / ".git" / "hooks"
    for hook in ("pre-commit", "post-commit"):
        (hooks / hook).write_text("#!/bin/sh\ntouch hook-pwned\n")
        (hooks / hook).chmod(0o755)
    # What a tenant could plant in a repository's config (e.g. through a bare repository it wrote).
    with open(root / "work" / ".git" / "config", "a") as fh:
        fh.write(
            '[core]\n\tfsmonitor = "touch fsmonitor-pwned; false"\n\tpager = "touch pager-pwned; cat"\n'
            '\tsshCommand = "touch ssh-pwned"\n\teditor = "touch editor-pwned"\n'
            '[filter "evil"]\n\tclean = "touch filter-pwned; cat"\n\tsmudge = "touch filter-pwned; cat"\n'
            '[credential]\n\thelper = "!touch credential-pwned"\n'
        )
    for command in ("git -C work status", "git -C work add a.txt", "git -C work commit -q -m first",
                    "git -C work log --oneline"):
        result = run(ctx, command)
        assert result.success and result.data["exit_code"] == 0, (command, result)
    assert "first" in run(ctx, "git -C work log --oneline").data["stdout"]
    for name in ("hook-pwned", "fsmonitor-pwned", "pager-pwned", "ssh-pwned", "editor-pwned",
                 "filter-pwned", "credential-pwned"):
        assert found_anywhere(name, layout["tmp"]) == [], name

    with open(root / "work" / ".git" / "config", "a") as fh:
        fh.write('[diff]\n\texternal = "touch extdiff-pwned"\n')
    write(ctx, "work/a.txt", "two\n")
    refused = run(ctx, "git -C work diff")
    assert refused.error_code == "INVALID_PARAMS" and "diff.external" in (refused.error or ""), refused
    assert found_anywhere("extdiff-pwned", layout["tmp"]) == []


class _Recorder(BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_GET(self) -> None:
        self.hits.append(self.path)
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def loopback_http() -> Iterator[tuple[str, list[str]]]:
    hits: list[str] = []
    handler = type("Recorder", (_Recorder,), {"hits": hits})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", hits
    finally:
        server.shutdown()
        server.server_close()


@needs_git
@needs_bwrap
def test_git_ls_remote_cannot_reach_a_loopback_server(
    ctx: BuiltinContext, loopback_http: tuple[str, list[str]]
) -> None:
    url, hits = loopback_http
    result = run(ctx, f"git ls-remote {url}/repo.git")
    assert result.success and result.data["exit_code"] != 0, result
    assert hits == []


@needs_bwrap
@pytest.mark.skipif(shutil.which("node") is None, reason="node not installed")
def test_the_sandbox_has_no_network(
    ctx: BuiltinContext, layout: dict[str, Path], loopback_http: tuple[str, list[str]]
) -> None:
    url, hits = loopback_http
    write(ctx, "fetch.js", f"require('http').get('{url}/x', r => console.log('status', r.statusCode))"
                           ".on('error', e => console.log('error', e.code));\n")
    opted = dataclasses.replace(ctx, command_allowlist=frozenset({"node"}), interpreters_allowed=frozenset({"node"}))
    result = run(opted, "node fetch.js")
    assert result.success and result.data["sandboxed"], result
    assert "error ECONNREFUSED" in result.data["stdout"], result
    assert hits == []


@needs_bwrap
def test_a_sandboxed_command_cannot_write_outside_the_workspace(ctx: BuiltinContext, layout: dict[str, Path]) -> None:
    shell = dataclasses.replace(ctx, command_allowlist=frozenset({"sh", "id"}))
    outside = layout["outside"] / "pwned"
    sibling = layout["root"].parent / "pwned-sibling"
    for command in (f'sh -c "touch {outside}"', f'sh -c "touch {layout["root"]}/../pwned-sibling"'):
        # Either refused or written to the sandbox's private, discarded /tmp: never to the host.
        assert run(shell, command).success, command
    assert not outside.exists() and not sibling.exists()
    for command in ('sh -c "touch /usr/pwned"', 'sh -c "touch /etc/pwned"', 'sh -c "touch /pwned"'):
        result = run(shell, command)
        assert result.success and result.data["exit_code"] != 0, (command, result)
    assert not Path("/usr/pwned").exists() and not Path("/etc/pwned").exists()
    inside = run(shell, 'sh -c "touch made-inside"')
    assert inside.success and inside.data["exit_code"] == 0 and (layout["root"] / "made-inside").exists()
    assert run(shell, "id -u").data["stdout"].strip() == "65534"
    # The server's secrets folder and environment are not there either.
    seen = run(shell, f'sh -c "ls {Path.cwd()}"')
    assert seen.data["exit_code"] != 0


@needs_bwrap
def test_rlimits_cap_file_size(ctx: BuiltinContext, layout: dict[str, Path]) -> None:
    copy = dataclasses.replace(ctx, command_allowlist=frozenset({"cp"}), sandbox=SandboxPolicy(file_size_bytes=1 << 20))
    with open(layout["root"] / "src.bin", "wb") as fh:
        fh.truncate(5 << 20)
    result = run(copy, "cp src.bin dst.bin")
    assert result.success and result.data["exit_code"] != 0, result
    assert (layout["root"] / "dst.bin").stat().st_size <= 1 << 20


@needs_bwrap
@pytest.mark.skipif(cgroup_root(None) is None, reason="no writable cgroup for a per-tenant memory cap on this host")
def test_the_tenants_memory_cap_holds_over_every_command(ctx: BuiltinContext, layout: dict[str, Path]) -> None:
    # Each process stays under its own address-space cap; the tenant's total (a cgroup) stops what passes it.
    (layout["root"] / "hog.py").write_text("b = bytearray(250 << 20)\nb[::4096] = b'x' * len(b[::4096])\nprint('held')\n")
    python = dataclasses.replace(ctx, command_allowlist=frozenset({"python3"}), interpreters_allowed=frozenset({"python3"}))
    free = run(dataclasses.replace(python, sandbox=SandboxPolicy(extra_ro_paths=(sys.base_prefix,))), "python3 hog.py")
    assert free.success and free.data["exit_code"] == 0 and "held" in free.data["stdout"], free
    capped = dataclasses.replace(python, sandbox=SandboxPolicy(extra_ro_paths=(sys.base_prefix,),
                                                               tenant_memory_bytes=150 << 20))
    stopped = run(capped, "python3 hog.py")
    assert stopped.data is None or stopped.data["exit_code"] != 0, stopped
    assert "held" not in ((stopped.data or {}).get("stdout") or "")


def test_sandbox_off_runs_plain_and_says_so(ctx: BuiltinContext) -> None:
    off = dataclasses.replace(ctx, command_allowlist=frozenset({"id"}), sandbox=SandboxPolicy(enabled=False))
    result = run(off, "id -u")
    assert result.success and result.data["sandboxed"] is False
    assert result.data["stdout"].strip() == str(os.getuid())


def test_missing_bubblewrap_fails_with_how_to_install(ctx: BuiltinContext, layout: dict[str, Path]) -> None:
    missing = dataclasses.replace(
        ctx, command_allowlist=frozenset({"touch"}), sandbox=SandboxPolicy(bwrap=str(layout["tmp"] / "no-bwrap"))
    )
    result = run(missing, "touch ran-anyway")
    assert result.success is False and result.error_code == "EXECUTION_ERROR", result
    assert "apt-get install bubblewrap" in (result.error or "") and "bubblewrap" in (result.error or "")
    assert not (layout["root"] / "ran-anyway").exists()


def test_a_sandbox_that_cannot_start_fails_and_runs_nothing(ctx: BuiltinContext, layout: dict[str, Path]) -> None:
    broken = layout["tmp"] / "bwrap-broken"
    broken.write_text("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n")
    broken.chmod(0o755)
    failing = dataclasses.replace(ctx, command_allowlist=frozenset({"touch"}), sandbox=SandboxPolicy(bwrap=str(broken)))
    result = run(failing, "touch ran-anyway")
    assert result.error_code == "EXECUTION_ERROR" and "could not start" in (result.error or ""), result
    assert "Permission denied" in (result.error or "") and "apt-get install bubblewrap" in (result.error or "")
    assert not (layout["root"] / "ran-anyway").exists()


@pytest.mark.skipif(shutil.which("npm") is None, reason="npm not installed")
@pytest.mark.parametrize("sandboxed", [True, False], ids=["sandbox", "sandbox-off"])
def test_npm_never_runs_package_scripts(ctx: BuiltinContext, layout: dict[str, Path], sandboxed: bool) -> None:
    if sandboxed and not os.access(SandboxPolicy().bwrap, os.X_OK):
        pytest.skip("bubblewrap not installed")
    test_ctx = dataclasses.replace(ctx, sandbox=SandboxPolicy(enabled=sandboxed))
    scripts = {name: f"node -e \"require('fs').writeFileSync('{name}-ran', '')\""
               for name in ("preinstall", "install", "postinstall", "prepare", "test", "start")}
    import json

    write(test_ctx, "package.json", json.dumps({"name": "p", "version": "1.0.0", "scripts": scripts}))
    for command in ("npm test", "npm start", "npm run test", "npm run-script start"):
        assert run(test_ctx, command).error_code == "INVALID_PARAMS", command
    result = run(test_ctx, "npm install --no-audit")
    assert result.success, result
    assert sorted(p.name for p in layout["root"].glob("*-ran")) == []


@needs_bwrap
def test_no_command_runs_where_the_tenants_memory_cap_cannot_be_held(ctx: BuiltinContext,
                                                                     layout: dict[str, Path]) -> None:
    """Per-process rlimits alone let three children hold 900 MiB each: without a cgroup for the total, refuse."""
    nowhere = layout["tmp"] / "no-such-cgroup"
    uncapped = dataclasses.replace(ctx, command_allowlist=frozenset({"touch"}), sandbox=SandboxPolicy(
        tenant_memory_bytes=150 << 20, cgroup_root=str(nowhere)))
    result = run(uncapped, "touch ran-anyway")
    assert result.success is False and result.error_code == "EXECUTION_ERROR", result
    assert "total memory cap (150 MiB)" in (result.error or "") and "TOOLHUB_SANDBOX_CGROUP" in (result.error or "")
    assert str(nowhere) in (result.error or "")
    assert not (layout["root"] / "ran-anyway").exists()
    # No total cap asked for (the operator's TOOLHUB_SANDBOX_TENANT_MEMORY_MB=0): the command runs.
    no_cap = dataclasses.replace(uncapped, sandbox=SandboxPolicy(cgroup_root=str(nowhere)))
    assert run(no_cap, "touch ran").data["exit_code"] == 0
    assert (layout["root"] / "ran").exists()
