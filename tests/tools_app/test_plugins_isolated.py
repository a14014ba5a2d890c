"""The sample plugin reaches the plugin tests from a folder of its own, never through the `.venv` `make run` serves."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from django.conf import settings

from tests.waiting import PROCESS_BOUND_S, scaled

ROOT = Path(settings.BASE_DIR)


def test_make_test_installs_nothing_into_the_venv() -> None:
    # A dry run prints every command `make test` would run; none may install the sample into the venv.
    out = subprocess.run(["make", "-n", "test", "test-plugins"], cwd=ROOT, capture_output=True, text=True,
                         timeout=scaled(60))
    assert out.returncode == 0, out.stderr
    installs = [line for line in out.stdout.splitlines() if "pip install" in line and "sample-plugin" in line]
    assert installs == []


def test_the_tests_see_the_sample_from_their_own_folder() -> None:
    dist = metadata.distribution("toolhub-sample-plugin")
    found = Path(str(dist.locate_file(""))).resolve()
    assert found == (Path(settings.VAR_DIR) / "test-plugins").resolve()
    names = {ep.name for ep in dist.entry_points if ep.group == "toolhub.tools"}
    assert names == {"sample_retitle", "sample_word_count"}
    assert metadata.version("toolhub-sample-plugin") == "0.1.0"


@pytest.fixture(scope="module")
def dev_process() -> list[str]:
    """One process on the settings `make run` uses (config.settings.dev, the same .venv), started from this suite
    after the plugin tests loaded the sample in this process: the last three lines it prints are whether the
    test-plugins folder is on its sys.path, whether it finds the sample distribution, and its registry's sample_*
    tools. (One process answers both tests below: a Django start is ~2 s of CPU.)"""
    code = ("import sys, django; django.setup()\n"
            "print(any(p.endswith('test-plugins') for p in sys.path))\n"
            "from importlib import metadata\n"
            "from tools_app.runtime import registry\n"
            "try:\n    metadata.distribution('toolhub-sample-plugin'); print('installed')\n"
            "except metadata.PackageNotFoundError:\n    print('absent')\n"
            "print(sorted(n for n in registry.discover(refresh=True) if n.startswith('sample_')))\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TOOLHUB_TOOL_PLUGINS")}
    env["DJANGO_SETTINGS_MODULE"] = "config.settings.dev"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=PROCESS_BOUND_S)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip().splitlines()[-3:]


def test_other_settings_leave_the_folder_off_the_path(dev_process: list[str]) -> None:
    assert dev_process[0] == "False"


def test_what_make_run_serves_offers_no_sample_tools_after_the_tests(dev_process: list[str]) -> None:
    # This runs inside the suite, after the plugin tests loaded the sample in this process: a process on the
    # settings `make run` uses (config.settings.dev, the same .venv) still finds no sample distribution and
    # its registry no sample_* tool, so real tenants never get them from a test run.
    assert dev_process[1:] == ["absent", "[]"]
    # ... while the tests themselves do see it (from var/test-plugins/, not the venv).
    assert metadata.distribution("toolhub-sample-plugin").version == "0.1.0"
