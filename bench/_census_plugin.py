"""pytest plugin for bench/child_census.py: writes the running test's node id to $TOOLHUB_CENSUS_CURRENT, so the
census can name the test a child process was started for when its environment does not say it (`-p bench._census_plugin`)."""

from __future__ import annotations

import os

import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_logstart(nodeid: str, location: object) -> None:
    path = os.environ.get("TOOLHUB_CENSUS_CURRENT")
    if path:
        with open(path, "w") as f:
            f.write(nodeid)
