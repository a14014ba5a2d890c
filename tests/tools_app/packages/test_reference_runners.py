"""The reference servers (issue 41) added with other package runners than their READMEs name (`pipx run`,
`npm exec`, `bunx`) pass Test in the default sandbox (no network) and answer a call, run from the test package store.
Split from test_reference_registry.py (one click from a registry record) so that a parallel run spreads the two over
two workers; what they share is in reference_api.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.tools_app.packages.reference import BY_KEY
from tests.tools_app.packages.reference_api import (
    MARKS,
    _close_pool,
    _prepared,
    _store,
    create,
    passes_test_and_answers,
    reachable,
)
from tools_app.models import Tool
from tools_app.runtime.mcp.spec import LocalSpec
from tools_app.wiring.specs import server_spec
from tools_app.wiring.workspaces import workspace_for

pytestmark = MARKS
__all__ = ["_close_pool", "_prepared", "_store"]  # the fixtures, used by name


@pytest.mark.parametrize(("argv", "key"), [
    (["pipx", "run", "mcp-server-time"], "time"),
    (["npm", "exec", "--yes", "--", "@modelcontextprotocol/server-everything"], "everything"),
    (["bunx", "@modelcontextprotocol/server-everything"], "everything"),
])
def test_other_package_runners_install_the_same_way(api: Any, tenant: Any, argv: list[str], key: str) -> None:
    """`pipx run`, `npm exec` and `bunx` name their package like `uvx` and `npx`: the runner itself never runs (none
    of them need be installed here), the package is installed into the store and run from there."""
    ref = BY_KEY[key]
    reachable(ref)
    tool_id = create(api, f"{key}-{argv[0]}", argv)
    package = passes_test_and_answers(api, tool_id, ref, workspace_for(tenant))
    assert package["status"] == "installed"
    target = server_spec(Tool.objects.get(pk=tool_id)).target
    assert isinstance(target, LocalSpec) and Path(target.command).name not in ("pipx", "npm", "bunx")
