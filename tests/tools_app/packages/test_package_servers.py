"""Servers from packages (issue 41), with the real registries: `npx -y ...` and `uvx ...` LOCAL tools install once
into the store outside the sandbox and run from it inside the default sandbox (no network); a misspelled package
fails Test at once with a typed error; the store is read-only to the server; versions switch and are freed."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from tests.fixtures import real_servers as rs
from tests.tools_app.discovered import Discovered
from tests.waiting import PROCESS_BOUND_S, scaled
from tools_app.models import Tool
from tools_app.packages.models import PackageInstall, ToolPackage
from tools_app.runtime.mcp.spec import LocalSpec
from tools_app.runtime.packages import store
from tools_app.runtime.sandbox import bwrap_argv, check_available
from tools_app.wiring.pool import pool
from tools_app.wiring.specs import server_sandbox, server_spec

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.real_servers]
EVERYTHING = ["-y", "@modelcontextprotocol/server-everything"]


@pytest.fixture(autouse=True)
def _close_pool() -> Any:
    yield
    pool().close_all()


@pytest.fixture
def registries_reachable() -> None:
    """Skip (saying why) where npm or PyPI cannot be reached, as the pinned real servers do."""
    rs.require("npm")
    rs.require("py")


def create(api: Any, name: str, command: str, args: list[str]) -> int:
    resp = api.post("/api/v1/tools/", {"name": name, "type": "LOCAL",
                                       "config": {"command": command, "args": args, "startup_timeout_s": 30}},
                    format="json")
    assert resp.status_code == 201, resp.content
    return int(resp.json()["id"])


def test_npx_server_installs_once_and_runs_sandboxed_without_network(api: Any, registries_reachable: None) -> None:
    tool_id = create(api, "everything", "npx", EVERYTHING)
    tool = Tool.objects.get(pk=tool_id)
    assert server_sandbox(tool.tenant) is not None and not tool.tenant.local_network == "host"
    tested = api.post(f"/api/v1/tools/{tool_id}/test/").json()  # the first Test includes the install
    assert tested["ok"], tested
    package = api.get(f"/api/v1/tools/{tool_id}/").json()["package"]
    assert package["manager"] == "npm" and package["name"] == "@modelcontextprotocol/server-everything"
    assert package["status"] == "installed" and package["version"] and package["size"] > 0, package
    assert package["installed_at"] and package["error"] is None

    spec = server_spec(tool)
    assert isinstance(spec.target, LocalSpec) and spec.target.sandbox is not None
    assert spec.target.command != "npx" and spec.target.sandbox.policy.store_paths
    assert not spec.target.sandbox.share_net

    discovered = Discovered()  # the refresh lists what the second Test found (its server not started a third time)
    with discovered.probes():
        again = api.post(f"/api/v1/tools/{tool_id}/test/").json()  # from the store (bench/packages.py times both)
    assert again["ok"], again
    discovered.refresh(api, tool_id)
    body = api.post(f"/api/v1/tools/{tool_id}/invoke/", {"function": "echo", "arguments": {"message": "hi there"}},
                    format="json").json()
    assert body["success"] and "hi there" in body["text"], body

    # A second tenant's tool of the same package uses the same install.
    assert PackageInstall.objects.filter(name="@modelcontextprotocol/server-everything").count() == 1


def test_uvx_server_installs_and_answers_a_call(api: Any, staff: Any, registries_reachable: None) -> None:
    tool_id = create(api, "time", "uvx", ["mcp-server-time", "--local-timezone", "UTC"])
    discovered = Discovered()  # the refresh below lists what this Test found (one server start, not two)
    with discovered.probes():
        tested = api.post(f"/api/v1/tools/{tool_id}/test/").json()
    assert tested["ok"] and tested["server"]["name"] == "mcp-time", tested
    package = api.get(f"/api/v1/tools/{tool_id}/").json()["package"]
    assert (package["manager"], package["name"], package["status"]) == ("pypi", "mcp-server-time", "installed")
    page = staff.get(f"/admin/tools_app/tool/{tool_id}/change/").content.decode()
    assert "toolhub-package-installed" in page and "read-only to the server" in page
    discovered.refresh(api, tool_id)
    body = api.post(f"/api/v1/tools/{tool_id}/invoke/",
                    {"function": "convert_time",
                     "arguments": {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}},
                    format="json").json()
    assert body["success"] and "T21:00:00+09:00" in body["text"], body


def test_misspelled_package_fails_test_at_once_naming_it(api: Any, staff: Any, registries_reachable: None) -> None:
    tool_id = create(api, "typo", "npx", ["-y", "@modelcontextprotocol/server-everythingg"])
    tested = api.post(f"/api/v1/tools/{tool_id}/test/").json()  # at once: bench/packages.py times it
    assert not tested["ok"] and tested["error"]["code"] == "package_not_found", tested
    assert "@modelcontextprotocol/server-everythingg" in tested["error"]["message"]
    assert "registry.npmjs.org" in tested["error"]["message"]
    package = api.get(f"/api/v1/tools/{tool_id}/").json()["package"]
    assert package["status"] == "failed" and package["error"]["code"] == "package_not_found"

    page = staff.get(f"/admin/tools_app/tool/{tool_id}/change/").content.decode()
    assert "toolhub-package-failed" in page and "package_not_found" in page

    tool_id = create(api, "typo-py", "uvx", ["mcp-server-time==0.0.1"])
    tested = api.post(f"/api/v1/tools/{tool_id}/test/").json()
    assert tested["error"]["code"] == "package_not_found" and "0.0.1" in tested["error"]["message"], tested


def test_the_store_is_read_only_to_the_server(api: Any, registries_reachable: None) -> None:
    tool_id = create(api, "everything", "npx", EVERYTHING)
    assert api.post(f"/api/v1/tools/{tool_id}/test/").json()["ok"]
    spec = server_spec(Tool.objects.get(pk=tool_id))
    assert isinstance(spec.target, LocalSpec) and spec.target.sandbox is not None
    box = spec.target.sandbox
    store_dir = box.policy.store_paths[0]
    victim = Path(store_dir) / "node_modules" / "@modelcontextprotocol" / "server-everything" / "package.json"
    script = (f'echo pwned > {store_dir}/new-file; a=$?; echo pwned >> {victim}; b=$?; '
              f'rm -f {victim}; c=$?; echo "$a $b $c"')
    argv = bwrap_argv(box.policy, bwrap=check_available(box.policy), workspace=Path(box.workspace),
                      argv=["/bin/sh", "-c", script], env={"PATH": "/usr/bin:/bin"}, uid=box.uid)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=scaled(30), check=False)
    codes = done.stdout.split()
    assert len(codes) == 3 and all(code != "0" for code in codes), (done.stdout, done.stderr)
    assert "Read-only file system" in done.stderr
    assert not (Path(store_dir) / "new-file").exists() and victim.read_text().startswith("{")


@pytest.fixture
def tasks_inline() -> Any:
    """Celery tasks run inline here even where CI runs a real worker (which would race these assertions); the
    setting is restored after (monkeypatch cannot: Celery's settings refuse the delattr of its undo)."""
    from celery import current_app

    before = current_app.conf.task_always_eager
    current_app.conf.task_always_eager = True
    try:
        yield
    finally:
        current_app.conf.task_always_eager = before


def link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def own_store_from_the_shared(tmp_path: Path, settings: Any, manager: str, name: str, versions: list[str]) -> None:
    """The test's own package store, holding copies of the versions the shared test store holds (prepared once per
    machine: tests/tools_app/packages/reference.py): for a test that frees what it used, which in the shared store
    would make the next test (or run) needing it install it again, and pull it from under a test of another worker
    running from it. A version the shared store lacks is installed by the test, as before. The files are hard
    links (read-only in both stores: freeing the copy unlinks its names, the shared files stay), not copies of ~7,000
    files' bytes; a store on another file system is copied."""
    shared, own = settings.TOOLHUB_PACKAGE_STORE, tmp_path / "store"
    for version in versions:
        if store.installed(shared, manager, name, version) is not None:
            shutil.copytree(store.folder(shared, manager, name, version), store.folder(own, manager, name, version),
                            symlinks=True, copy_function=link_or_copy)
    settings.TOOLHUB_PACKAGE_STORE = str(own)


def test_version_change_installs_beside_and_last_tool_frees_it(api: Any, settings: Any, tasks_inline: None,
                                                                tmp_path: Path, registries_reachable: None) -> None:
    """The switch from one version to the other and the freeing of each (the installs themselves:
    test_reference_install_npm.py and test_npx_server_installs_once_and_runs_sandboxed_without_network)."""
    settings.TOOLHUB_PACKAGE_INSTALL_ON_SAVE = True  # the install task runs (inline) on save
    old, new = "2026.1.26", "2026.8.31"
    own_store_from_the_shared(tmp_path, settings, "npm", "@modelcontextprotocol/server-memory", [old, new])
    tool_id = create(api, "memory", "npx", ["-y", f"@modelcontextprotocol/server-memory@{old}"])
    link = ToolPackage.objects.select_related("current").get(tool_id=tool_id)
    assert link.current is not None and link.current.version == old
    old_path = Path(link.current.path)
    assert old_path.is_dir()
    resp = api.patch(f"/api/v1/tools/{tool_id}/",
                     {"config": {"command": "npx", "args": ["-y", f"@modelcontextprotocol/server-memory@{new}"]}},
                     format="json")
    assert resp.status_code == 200, resp.content
    link.refresh_from_db()
    assert link.current is not None and link.current.version == new
    assert not old_path.exists() and not PackageInstall.objects.filter(version=old, name=link.name).exists()
    assert api.post(f"/api/v1/tools/{tool_id}/test/").json()["ok"]
    new_path = Path(link.current.path)
    assert api.delete(f"/api/v1/tools/{tool_id}/").status_code in (200, 204)
    assert not new_path.exists() and not PackageInstall.objects.filter(name=link.name).exists()
    assert str(new_path).startswith(settings.TOOLHUB_PACKAGE_STORE)


def test_test_waits_for_an_install_in_progress(api: Any, monkeypatch: pytest.MonkeyPatch,
                                               registries_reachable: None) -> None:
    """Another process holds the install claim: Test waits for it to finish and then passes (no startup timeout)."""
    from tools_app.packages import services
    from tools_app.runtime.packages import refs

    ref = refs.parse("npx", EVERYTHING)
    assert ref is not None
    version = "2026.8.31"
    row, claimed = services._claim(ref, version)  # "the other process" claims the install first
    assert claimed
    waiting = threading.Event()
    real_wait = services._wait

    def observed_wait(row: Any, ref: Any) -> Any:
        waiting.set()
        return real_wait(row, ref)

    monkeypatch.setattr(services, "_wait", observed_wait)

    def other_process() -> None:
        assert waiting.wait(PROCESS_BOUND_S)
        services._install(ref, PackageInstall.objects.get(pk=row.pk))
        connection.close()

    worker = threading.Thread(target=other_process)
    worker.start()
    try:
        tool_id = create(api, "everything", "npx", [*EVERYTHING[:1], f"{EVERYTHING[1]}@{version}"])
        tested = api.post(f"/api/v1/tools/{tool_id}/test/").json()
    finally:
        worker.join(PROCESS_BOUND_S)
    assert waiting.is_set() and tested["ok"], tested
    assert PackageInstall.objects.get(pk=row.pk).status == "installed"


def test_a_prewarmed_store_serves_pinned_tools_without_any_registry(api: Any, settings: Any,
                                                                    registries_reachable: None) -> None:
    pinned = [EVERYTHING[0], f"{EVERYTHING[1]}@2026.8.31"]
    warm = create(api, "warm", "npx", pinned)
    assert api.post(f"/api/v1/tools/{warm}/test/").json()["ok"]
    settings.TOOLHUB_PACKAGE_REGISTRY_HOSTS = ["mirror.internal.invalid"]  # no public registry allowed any more
    offline = create(api, "offline", "npx", pinned)
    tested = api.post(f"/api/v1/tools/{offline}/test/").json()
    assert tested["ok"], tested
    unpinned = create(api, "unpinned", "npx", EVERYTHING)
    refused = api.post(f"/api/v1/tools/{unpinned}/test/").json()
    assert refused["error"]["code"] == "package_registry_refused", refused
    assert "registry.npmjs.org" in refused["error"]["message"]
    assert "TOOLHUB_PACKAGE_REGISTRY_HOSTS" in refused["error"]["message"]


def test_the_store_is_prewarmed_and_listed_from_the_command_line(registries_reachable: None) -> None:
    from io import StringIO

    from django.core.management import call_command
    from django.core.management.base import CommandError

    out = StringIO()
    call_command("toolhub_packages", "install", f"npx -y {EVERYTHING[1]}@2026.8.31", stdout=out)
    assert "@modelcontextprotocol/server-everything@2026.8.31: installed" in out.getvalue()
    listed = StringIO()
    call_command("toolhub_packages", "list", stdout=listed)
    assert "npm @modelcontextprotocol/server-everything@2026.8.31" in listed.getvalue()
    err = StringIO()
    with pytest.raises(CommandError):
        call_command("toolhub_packages", "install", "uvx no-such-package-toolhub-xyz", stdout=StringIO(), stderr=err)
    assert "package_not_found" in err.getvalue()
