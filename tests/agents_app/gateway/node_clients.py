"""The npm MCP clients (TypeScript SDK, MCP Inspector CLI), installed from the pinned lock into var/.

`python -m tests.agents_app.gateway.node_clients` installs them ahead of time (`make gateway-clients`).
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
from pathlib import Path
from typing import Any

from django.conf import settings

from tests.fixtures.npm_lock import install_locked, node_available  # noqa: F401  (node_available: the tests import it here)
from tests.waiting import PROCESS_BOUND_S, scaled

HERE = Path(__file__).resolve().parent / "node"
FILES = ("package.json", "package-lock.json", "client.mjs", "fidelity.mjs", "oauth_client.mjs")


def install_dir() -> Path:
    return Path(settings.VAR_DIR) / "gateway-clients"


def ensure_installed() -> Path:
    """`npm ci` into var/gateway-clients when the lock changed since the last install; returns the folder."""
    return install_locked(HERE, FILES, install_dir())

class TsClient:
    """The TypeScript SDK client script as a subprocess: send a command, read the next JSON event."""

    def __init__(self, folder: Path, url: str, token: str, *, transport: str = "streamable_http",
                 elicit: bool = False) -> None:
        args = ["node", str(folder / "client.mjs"), url, token, transport] + (["elicit"] if elicit else [])
        self.proc = subprocess.Popen(args, cwd=folder, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()
        self.seen: list[dict[str, Any]] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.strip():
                self.events.put(json.loads(line))
        self.events.put({"event": "exit"})

    def next(self, *wanted: str, timeout_s: float = scaled(60)) -> dict[str, Any]:
        """The next event named one of `wanted` (others are kept in `seen`)."""
        while True:
            event = self.events.get(timeout=timeout_s)
            if event["event"] in wanted or event["event"] in ("error", "exit"):
                return event
            self.seen.append(event)

    def send(self, **cmd: Any) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()

    def close(self) -> str:
        try:
            if self.proc.poll() is None:
                self.send(op="close")
                self.proc.wait(15)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait(5)
        return self.proc.stderr.read() if self.proc.stderr else ""


def inspector(folder: Path, url: str, token: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`mcp-inspector --cli <url> --transport http --header 'Authorization: Bearer …' <args>`."""
    return subprocess.run(
        [str(folder / "node_modules" / ".bin" / "mcp-inspector"), "--cli", url, "--transport", "http",
         "--header", f"Authorization: Bearer {token}", *args],
        cwd=folder, capture_output=True, text=True, timeout=PROCESS_BOUND_S,
    )


if __name__ == "__main__":
    import os

    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.dev")
    django.setup()
    print(ensure_installed())
