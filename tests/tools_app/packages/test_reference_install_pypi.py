"""The reference packages' install itself (issue 41), PyPI's half: a first Test installs mcp-server-time into an
empty store from the real index (a virtualenv of pip's hash-pinned wheels), read-only; then the server runs from it
and answers. npm's half, and why the two are separate modules: test_reference_install_npm.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.tools_app.packages.reference_api import (
    MARKS,
    _close_pool,
    _prepared,
    _store,
    installs_into_an_empty_store,
)

pytestmark = MARKS
__all__ = ["_close_pool", "_prepared", "_store"]  # the fixtures, used by name


def test_the_first_test_installs_the_pypi_package_into_an_empty_store(api: Any, tenant: Any, settings: Any,
                                                                      tmp_path: Path) -> None:
    installs_into_an_empty_store(api, tenant, settings, tmp_path, "time")
