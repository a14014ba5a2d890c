"""Fixtures for built-in tests: a tenant workspace with an outside directory and a sibling-prefix twin."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools_app.runtime.builtins import BuiltinContext
from tools_app.runtime.builtins.command_rules import DEFAULT_ALLOWLIST


@pytest.fixture
def layout(tmp_path: Path) -> dict[str, Path]:
    root = tmp_path / "demo"
    evil = tmp_path / "demo_evil"
    outside = tmp_path / "outside"
    for d in (root, evil, outside):
        d.mkdir()
    (root / "hello.txt").write_text("hello world\n")
    (root / "sub").mkdir()
    (root / "sub" / "inner.txt").write_text("inner\n")
    (evil / "secret.txt").write_text("sibling secret\n")
    (outside / "secret.txt").write_text("outside secret\n")
    return {"root": root, "evil": evil, "outside": outside, "tmp": tmp_path}


@pytest.fixture
def ctx(layout: dict[str, Path]) -> BuiltinContext:
    return BuiltinContext(tenant_slug="demo", workspace=layout["root"], command_allowlist=DEFAULT_ALLOWLIST)


def snapshot(root: Path) -> dict[str, bytes | str]:
    """Every entry under `root` with its content (files) or link target (symlinks), to assert no change."""
    out: dict[str, bytes | str] = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        if p.is_symlink():
            out[rel] = "->" + str(p.readlink())
        elif p.is_file():
            out[rel] = p.read_bytes()
        else:
            out[rel] = "dir"
    return out
