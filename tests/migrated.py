"""The migrated SQLite database the test processes start from (tests/conftest.py's `django_db_setup`), and a copy of
it for a test that starts Toolhub in a process of its own on a fresh SQLite file (`toolhub_run`)."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import sys
from pathlib import Path


def migrations_key() -> str:
    """A hash of what a migrated database is made of: every installed app's migration files, Django's version (its
    own apps' migrations and the schema editor) and SQLite's."""
    import django
    from django.apps import apps

    digest = hashlib.sha256(f"{django.get_version()} {sys.version_info[:2]} {sqlite3.sqlite_version}".encode())
    for app in sorted(apps.get_app_configs(), key=lambda app: app.label):
        for path in sorted((Path(app.path) / "migrations").glob("*.py")):
            digest.update(f"{app.label}/{path.name}\0".encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def template_path(var_dir: Path) -> Path:
    """Where the migrated template of the current migrations is (or will be) under `var_dir`."""
    return Path(var_dir) / "xdist" / f"template-{migrations_key()}.sqlite3"


def sqlite_copy(source: Path, target: Path) -> None:
    """A consistent copy of a SQLite database (its WAL included) through SQLite's online backup."""
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(f"{target}{suffix}").unlink(missing_ok=True)
    tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    with sqlite3.connect(source) as src, sqlite3.connect(tmp) as dst:
        src.backup(dst)
    src.close()
    dst.close()
    tmp.replace(target)
