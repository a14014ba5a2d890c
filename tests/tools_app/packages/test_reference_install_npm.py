"""The reference packages' install itself (issue 41), npm's half: a first Test installs server-memory into an empty
store from the real registry (npm's lockfile, every package's integrity checked), read-only; then the server runs
from it and answers. PyPI's half is test_reference_install_pypi.py: the two installs share nothing (each has an
empty store of its own), and together they kept one worker over 60 s of a parallel run (a real PyPI install is
~20 s of pip's CPU alone), so each is a module that another worker can take (`--dist loadfile`). The other reference
tests run from the prepared store: test_reference_servers.py."""

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


def test_the_first_test_installs_the_npm_package_into_an_empty_store(api: Any, tenant: Any, settings: Any,
                                                                     tmp_path: Path) -> None:
    installs_into_an_empty_store(api, tenant, settings, tmp_path, "memory")
