"""What the reference-server modules share (test_reference_servers.py, test_reference_registry.py,
test_reference_runners.py, test_reference_install_npm.py, test_reference_install_pypi.py): the store fixtures and
adding a tool, then Test, refresh and calls through the API.

The issue's Done-when with the real registries (issue 41) is one set of tests split over five modules only so that
a parallel run (`--dist loadfile`: one worker per module) can spread them, none of them over 60 s; each module imports
the fixtures below by name (`__all__` there)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures import real_servers as rs
from tests.tools_app.discovered import Discovered
from tests.tools_app.packages.reference import BY_KEY, Reference, answers, fill, prepare_store
from tests.waiting import scaled
from tools_app.models import Tool
from tools_app.runtime.mcp.spec import LocalSpec
from tools_app.runtime.packages import store
from tools_app.wiring.pool import pool
from tools_app.wiring.specs import server_spec
from tools_app.wiring.workspaces import workspace_for

# A first install downloads a package and its dependencies from the real registries: minutes on a slow link (the
# suite's 120 s per test is for work that does not wait on the internet).
MARKS = [pytest.mark.django_db(transaction=True), pytest.mark.real_servers, pytest.mark.timeout(scaled(600))]


@pytest.fixture(autouse=True)
def _close_pool() -> Iterator[None]:
    yield
    pool().close_all()


@pytest.fixture(scope="module")
def _prepared() -> tuple[bool, str]:
    return prepare_store()  # a no-op once `make test-servers` (or an earlier run) prepared the store


@pytest.fixture(autouse=True)
def _store(_prepared: tuple[bool, str]) -> None:
    ok, why = _prepared
    if not ok:
        pytest.skip(why)


def reachable(ref: Reference) -> None:
    rs.require("npm" if ref.manager == "npm" else "py")


def create(api: Any, name: str, argv: list[str]) -> int:
    resp = api.post("/api/v1/tools/", {"name": name, "type": "LOCAL",
                                       "config": {"command": argv[0], "args": argv[1:], "startup_timeout_s": 30}},
                    format="json")
    assert resp.status_code == 201, resp.content
    return int(resp.json()["id"])


def passes_test_and_answers(api: Any, tool_id: int, ref: Reference, workspace: Path) -> dict[str, Any]:
    discovered = Discovered()  # the refresh below lists what this Test's probe found (one server start, not two)
    with discovered.probes():
        tested = api.post(f"/api/v1/tools/{tool_id}/test/").json()
    assert tested["ok"] and tested["tool_count"] > 0, tested
    package = api.get(f"/api/v1/tools/{tool_id}/").json()["package"]
    assert (package["manager"], package["name"], package["status"]) == (ref.manager, ref.package, "installed"), \
        package
    spec = server_spec(Tool.objects.get(pk=tool_id))
    assert isinstance(spec.target, LocalSpec) and spec.target.sandbox is not None
    assert not spec.target.sandbox.share_net and not spec.target.sandbox.public_net  # the default: no network
    assert spec.target.sandbox.policy.store_paths == (package_path(tool_id),)

    def invoke(function: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return api.post(f"/api/v1/tools/{tool_id}/invoke/", {"function": function, "arguments": arguments},
                        format="json").json()

    discovered.refresh(api, tool_id)
    answers(ref, invoke, workspace)
    return package


def installs_into_an_empty_store(api: Any, tenant: Any, settings: Any, tmp_path: Path, key: str) -> None:
    """The install itself, once per package manager (npm's lockfile, PyPI's hash-pinned venv): into a store nothing
    was installed in, by the tool's first Test, read-only; the server then runs from it and answers."""
    ref = BY_KEY[key]
    reachable(ref)
    empty = tmp_path / "store"
    settings.TOOLHUB_PACKAGE_STORE = str(empty)
    workspace = workspace_for(tenant)
    tool_id = create(api, key, [fill(a, workspace) for a in ref.readme])
    assert not empty.exists() or not any(empty.iterdir())
    package = passes_test_and_answers(api, tool_id, ref, workspace)
    installed = store.installed(empty, ref.manager, ref.package, package["version"])
    assert installed is not None and package_path(tool_id) == str(Path(installed.path).resolve())
    assert package["size"] == installed.size > 0 and package["installed_at"]
    assert not (Path(installed.path).stat().st_mode & 0o222)  # read-only, like every install in the store


def package_path(tool_id: int) -> str:
    from tools_app.packages.models import ToolPackage

    link = ToolPackage.objects.select_related("current").get(tool_id=tool_id)
    assert link.current is not None
    return str(Path(link.current.path).resolve())
