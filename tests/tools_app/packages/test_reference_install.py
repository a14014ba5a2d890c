"""The reference packages' install itself (issue 41): a first Test installs into an empty store, once per package
manager (npm and PyPI), from the real registries; then the server runs from it and answers (the other reference tests
run from the prepared store: test_reference_servers.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.tools_app.packages.reference import BY_KEY, fill
from tests.tools_app.packages.reference_api import (
    MARKS,
    _close_pool,
    _prepared,
    _store,
    create,
    package_path,
    passes_test_and_answers,
    reachable,
)
from tools_app.runtime.packages import store
from tools_app.wiring.workspaces import workspace_for

pytestmark = MARKS
__all__ = ["_close_pool", "_prepared", "_store"]  # the fixtures, used by name


@pytest.mark.parametrize("key", ["memory", "time"])
def test_the_first_test_installs_the_package_into_an_empty_store(api: Any, tenant: Any, settings: Any,
                                                                 tmp_path: Path, key: str) -> None:
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
