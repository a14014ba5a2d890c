"""No import circle between modules of tools_app, nor between siblings (packages taken whole) at any level of
any app, imports made inside functions counted (grimp's graph, the one
import-linter checks; scripts/import_cycles.py prints the cycles of any package)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("import_cycles", ROOT / "scripts" / "import_cycles.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_finder_sees_a_circle_made_inside_a_function(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "circled"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from circled import b\n")
    (package / "b.py").write_text("def late():\n    from circled import a\n    return a\n")
    (package / "c.py").write_text("from circled import a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    found = _script().cycles("circled")
    assert found == [["circled.a", "circled.b"]]


def test_tools_app_has_no_import_circle() -> None:
    assert _script().cycles("tools_app") == []


def test_the_finder_sees_a_circle_between_sibling_packages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No module circle, yet the packages `low` and `high` import each other: siblings taken whole."""
    package = tmp_path / "layered"
    for sub in ("low", "high"):
        (package / sub).mkdir(parents=True)
        (package / sub / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "low" / "a.py").write_text("def late():\n    from layered.high import b\n    return b\n")
    (package / "high" / "b.py").write_text("X = 1\n")
    (package / "high" / "c.py").write_text("from layered.low import a\n")
    (package / "leaf.py").write_text("from layered.low import a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    script = _script()
    assert script.cycles("layered") == []
    assert script.sibling_cycles("layered") == [["layered.high", "layered.low"]]


@pytest.mark.parametrize("app", ["tools_app", "agents_app", "market_app", "identity_app", "tenants_app", "core"])
def test_no_circle_between_siblings_at_any_level(app: str) -> None:
    assert _script().sibling_cycles(app) == []
