"""No import circle between modules of tools_app, imports made inside functions counted (grimp's graph, the one
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
