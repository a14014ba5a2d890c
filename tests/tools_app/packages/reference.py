"""The issue's five reference servers as a user adds them (their README's runner line) and as the official registry
lists them, each with a call that shows it answers. Shared by the package tests and bench/packages.py."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Invoke = Callable[[str, dict[str, Any]], dict[str, Any]]
ROOT = Path(__file__).resolve().parents[3]


@dataclass(frozen=True)
class Reference:
    key: str
    manager: str  # npm | pypi
    package: str
    readme: tuple[str, ...]  # the command line its README gives; "{workspace}" is the tenant workspace
    version: str  # the version its official-registry record names
    package_arguments: tuple[dict[str, Any], ...] = ()  # the record's packageArguments
    load_env: tuple[tuple[str, str], ...] = ()  # values the one-click load asks for; "{workspace}" as above


def fill(value: str, workspace: Path) -> str:
    return value.replace("{workspace}", str(workspace))


REFERENCE = [
    Reference("everything", "npm", "@modelcontextprotocol/server-everything",
              ("npx", "-y", "@modelcontextprotocol/server-everything"), "2026.8.31"),
    Reference("memory", "npm", "@modelcontextprotocol/server-memory",
              ("npx", "-y", "@modelcontextprotocol/server-memory"), "2026.8.31"),
    # Its README names the folders it may touch; in the sandbox that is the tenant workspace (the one folder there).
    Reference("filesystem", "npm", "@modelcontextprotocol/server-filesystem",
              ("npx", "-y", "@modelcontextprotocol/server-filesystem", "{workspace}"), "2026.8.31",
              ({"type": "positional", "valueHint": "allowed_directory", "isRequired": True,
                "description": "A folder the server may read and write"},),
              (("allowed_directory", "{workspace}"),)),
    Reference("time", "pypi", "mcp-server-time", ("uvx", "mcp-server-time"), "2026.10.19"),
    Reference("fetch", "pypi", "mcp-server-fetch", ("uvx", "mcp-server-fetch"), "2026.10.24"),
]
BY_KEY = {r.key: r for r in REFERENCE}
# Also kept in the prepared store, for a test that is not about installing: the older server-memory that
# test_package_servers.py's version change starts from (it copies both versions into a store of its own).
STORE_EXTRAS = [
    Reference("memory-old", "npm", "@modelcontextprotocol/server-memory",
              ("npx", "-y", "@modelcontextprotocol/server-memory@2026.1.26"), "2026.1.26"),
]


def pinned_line(ref: Reference) -> str:
    """The runner line naming the reference version exactly (the form an operator pre-warms a store with)."""
    return f"npx -y {ref.package}@{ref.version}" if ref.manager == "npm" else f"uvx {ref.package}=={ref.version}"


def missing_from(store_root: str | Path) -> list[Reference]:
    """The reference packages (and STORE_EXTRAS) whose version the store does not hold (complete) yet."""
    from tools_app.runtime.packages import store

    return [r for r in (*REFERENCE, *STORE_EXTRAS) if store.installed(store_root, r.manager, r.package, r.version) is None]


def prepare_store() -> tuple[bool, str]:
    """The five reference packages (and STORE_EXTRAS) in the test settings' package store (var/test-packages), installed by the
    product's own installer as an operator pre-warms a store (`manage.py toolhub_packages install` with the pinned
    lines) unless they are there already. `make test-servers` runs it once per machine, as it installs the real
    servers: the package tests then run their servers from the store, and only the test about installing installs
    (into an empty store of its own). Returns (ok, why not)."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.test"}
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
    from django.conf import settings

    missing = missing_from(settings.TOOLHUB_PACKAGE_STORE)
    if not missing:
        return True, ""
    try:
        done = subprocess.run([sys.executable, "manage.py", "toolhub_packages", "install",
                               *(pinned_line(r) for r in missing)],
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"preparing the package store failed: {exc}"
    if done.returncode != 0:
        tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-5:])
        return False, f"installing the reference packages into the store failed (registry unreachable?): {tail}"
    return True, ""


def answers(ref: Reference, invoke: Invoke, workspace: Path) -> None:
    """One call (or two) of the server that only a working server answers as asserted."""
    if ref.key == "everything":
        body = invoke("echo", {"message": "hello from the store"})
        assert body["success"] and "hello from the store" in body["text"], body
    elif ref.key == "memory":
        made = invoke("create_entities", {"entities": [{"name": "ada", "entityType": "person",
                                                        "observations": ["wrote the first program"]}]})
        assert made["success"], made
        graph = invoke("read_graph", {})
        assert graph["success"] and "wrote the first program" in graph["text"], graph
        # Its state went to the tenant's workspace, not beside its code in the (read-only, shared) store.
        assert "wrote the first program" in (workspace / "memory.jsonl").read_text()
    elif ref.key == "filesystem":
        (workspace / "notes.txt").write_text("notes in the workspace")
        read = invoke("read_text_file", {"path": str(workspace / "notes.txt")})
        assert read["success"] and "notes in the workspace" in read["text"], read
        made = invoke("create_directory", {"path": str(workspace / "made-by-the-server")})  # WRITE: no approval
        assert made["success"] and (workspace / "made-by-the-server").is_dir(), made
    elif ref.key == "time":
        body = invoke("convert_time", {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"})
        assert body["success"] and "T21:00:00+09:00" in body["text"], body
    elif ref.key == "fetch":
        # The default sandbox has no network: the server answers at once with its own error (it could not connect),
        # as a user would expect of a fetch tool that has no network; it neither hangs nor breaks its session.
        body = invoke("fetch", {"url": "https://example.com/"})
        assert not body["success"] and "example.com" in (body["error"] or ""), body
    else:  # pragma: no cover - a reference server without a call
        raise AssertionError(ref.key)
