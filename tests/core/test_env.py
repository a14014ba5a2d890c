"""Typed settings (core.env): a bad value stops startup naming the variable; every variable is documented."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from core import env
from tests.waiting import PROCESS_BOUND_S

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("reader", "raw", "expected"), [
    (lambda: env.env_int("TOOLHUB_T_INT", 3), "12", 12),
    (lambda: env.env_int("TOOLHUB_T_INT", 3), " ", 3),
    (lambda: env.env_float("TOOLHUB_T_FLOAT", 1.5), "0.25", 0.25),
    (lambda: env.env_bool("TOOLHUB_T_BOOL", False), "Yes", True),
    (lambda: env.env_bool("TOOLHUB_T_BOOL", True), "off", False),
    (lambda: env.env_choice("TOOLHUB_T_CHOICE", "any", ("any", "off")), "OFF", "off"),
    (lambda: env.env_list("TOOLHUB_T_LIST", "a"), "x, y,,z", ["x", "y", "z"]),
])
def test_good_values_are_typed(monkeypatch: pytest.MonkeyPatch, reader, raw: str, expected: object) -> None:
    for name in ("TOOLHUB_T_INT", "TOOLHUB_T_FLOAT", "TOOLHUB_T_BOOL", "TOOLHUB_T_CHOICE", "TOOLHUB_T_LIST"):
        monkeypatch.setenv(name, raw)
    assert reader() == expected


@pytest.mark.parametrize(("reader", "raw", "accepted"), [
    (lambda: env.env_int("TOOLHUB_T_BAD", 3), "abc", "a whole number >= 0"),
    (lambda: env.env_int("TOOLHUB_T_BAD", 3), "-1", "a whole number >= 0"),
    (lambda: env.env_float("TOOLHUB_T_BAD", 1.0), "nan", "a number >= 0"),
    (lambda: env.env_bool("TOOLHUB_T_BAD", False), "maybe", "1/0, true/false, yes/no, on/off"),
    (lambda: env.env_choice("TOOLHUB_T_BAD", "any", ("any", "off")), "some", "any, off"),
])
def test_a_bad_value_names_the_variable_and_what_is_accepted(monkeypatch: pytest.MonkeyPatch, reader, raw: str,
                                                             accepted: str) -> None:
    monkeypatch.setenv("TOOLHUB_T_BAD", raw)
    with pytest.raises(ImproperlyConfigured) as info:
        reader()
    assert str(info.value) == f"TOOLHUB_T_BAD={raw!r} is not valid; accepted: {accepted}"


def _manage(*args: str, **environ: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("TOOLHUB_")}
    clean["DJANGO_SETTINGS_MODULE"] = "config.settings.dev"
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env={**clean, **environ},
                          capture_output=True, text=True, timeout=PROCESS_BOUND_S)


def test_startup_stops_on_a_bad_variable_naming_it() -> None:
    done = _manage("check", TOOLHUB_BREAKER_THRESHOLD="three")
    assert done.returncode != 0
    assert "TOOLHUB_BREAKER_THRESHOLD='three' is not valid; accepted: a whole number >= 0" in done.stderr


def test_importing_the_settings_makes_no_folder(tmp_path: Path) -> None:
    var = tmp_path / "var"
    code = "import config.settings.base as s; print(s.STATIC_ROOT)"
    clean = {k: v for k, v in os.environ.items() if not k.startswith("TOOLHUB_")}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**clean, "TOOLHUB_VAR_DIR": str(var)},
                          capture_output=True, text=True, timeout=PROCESS_BOUND_S)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(var / "static") and not var.exists()


def test_the_configuration_page_lists_every_variable_the_settings_read() -> None:
    page = (ROOT / "docs" / "configuration.md").read_text()
    documented = set(re.findall(r"^\| `([A-Z0-9_]+)` \|", page, re.M))
    declared = {name for name in env.DECLARED if not name.startswith("TOOLHUB_T_")}
    assert len(declared) > 60  # the settings were read through core.env
    assert declared - documented == set(), "run `make docs-config`"
    assert documented - declared == set(), "a documented variable is no longer read: run `make docs-config`"


def test_the_configuration_page_is_current_and_describes_every_variable() -> None:
    """The committed table is what `make docs-config` writes today, and no variable goes without a description
    (the comment right above its read in config/settings)."""
    page = (ROOT / "docs" / "configuration.md").read_text()
    rows = [row for row in env.table(ROOT).splitlines() if not row.startswith("| `TOOLHUB_T_")]
    assert page[page.index("| Variable |"):] == "\n".join(rows) + "\n", "run `make docs-config`"
    undescribed = [row.split("`")[1] for row in rows[2:] if row.rstrip().endswith("|  |")]
    assert undescribed == [], "describe these in a comment right above their read in config/settings"
