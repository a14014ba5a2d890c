"""The npm `oidc-provider` (a real, certified OpenID provider), installed from the pinned lock into var/ and
started per test on 127.0.0.1 with accounts (and their groups) read from a JSON file at every sign-in.

`python -m tests.identity_app.oidc_node` installs it ahead of time (as `make gateway-clients` does for the
gateway's node clients)."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from django.conf import settings

from tests.fixtures.npm_lock import install_locked, node_available  # noqa: F401  (node_available: the tests import it here)

HERE = Path(__file__).resolve().parent / "node"
FILES = ("package.json", "package-lock.json", "provider.mjs")


def ensure_installed() -> Path:
    """`npm ci` into var/identity-oidc-provider when the lock changed since the last install; the folder."""
    return install_locked(HERE, FILES, Path(settings.VAR_DIR) / "identity-oidc-provider", capture_output=True)

class NodeProvider:
    """A running oidc-provider: `issuer`, and `set_accounts({...})` for who exists with which groups."""

    def __init__(self, folder: Path, accounts_file: Path, *, client_id: str, client_secret: str,
                 redirect_uri: str) -> None:
        self.accounts_file = accounts_file
        self.set_accounts({})
        self.proc = subprocess.Popen(
            ["node", str(folder / "provider.mjs"), str(accounts_file), client_id, client_secret, redirect_uri],
            cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()  # the provider prints its issuer once it listens
        if not line:
            raise RuntimeError(f"oidc-provider exited before listening (code {self.proc.wait(timeout=10)})")
        self.issuer = str(json.loads(line)["issuer"])

    def set_accounts(self, accounts: dict[str, dict[str, Any]]) -> None:
        tmp = self.accounts_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(accounts))
        tmp.replace(self.accounts_file)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)


@contextmanager
def node_provider(tmp_path: Path, **client: str) -> Iterator[NodeProvider]:
    provider = NodeProvider(ensure_installed(), tmp_path / "accounts.json", **client)
    try:
        yield provider
    finally:
        provider.stop()


if __name__ == "__main__":
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
    django.setup()
    print(ensure_installed())
