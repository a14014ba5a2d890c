"""The package store's own housekeeping: an installed (read-only) folder is removed whole, links and all."""

from __future__ import annotations

import os
from pathlib import Path

from tools_app.runtime.packages.store import _read_only, remove


def test_a_read_only_install_with_links_to_folders_is_removed(tmp_path: Path) -> None:
    # What a losing concurrent installer leaves behind (its partial folder, made read-only before the rename
    # failed), shaped like an npm install: node_modules/.bin links to a package folder.
    work = tmp_path / ".1.0.0.abc.partial"
    package = work / "node_modules" / "server"
    package.mkdir(parents=True)
    (package / "index.js").write_text("console.log(1)")
    (work / "node_modules" / ".bin").mkdir()
    os.symlink(package, work / "node_modules" / ".bin" / "server-dir")
    _read_only(work)
    remove(work)
    assert not work.exists()
    assert tmp_path.exists() and list(tmp_path.iterdir()) == []
