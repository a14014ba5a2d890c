"""Child-process hygiene shared by MCP stdio servers and execute_command: clean env, group kill."""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Mapping

# Only these reach a child from Toolhub's own environment; secrets and DB URLs never do.
BASE_ENV_KEYS = ("PATH", "HOME", "LANG", "TZ", "TMPDIR", "USER", "LOGNAME")
WINDOWS_ENV_KEYS = ("SYSTEMROOT", "PATHEXT", "COMSPEC", "WINDIR")


def base_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The allowlisted part of os.environ (PATH, HOME, LANG, LC_*, TZ, TMPDIR) plus `extra`."""
    keys = BASE_ENV_KEYS + (WINDOWS_ENV_KEYS if sys.platform == "win32" else ())
    env = {k: v for k, v in os.environ.items() if k in keys or k.startswith("LC_")}
    env.setdefault("PATH", os.defpath)
    if extra:
        env.update({str(k): str(v) for k, v in extra.items()})
    return env


def kill_process_group(pgid: int, *, term_wait_s: float = 2.0) -> None:
    """SIGTERM the group, wait, then SIGKILL whatever is left. Never raises for a gone group."""
    if sys.platform == "win32":  # pragma: no cover - not a target platform
        return
    for sig, wait in ((signal.SIGTERM, term_wait_s), (signal.SIGKILL, 1.0)):
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                os.killpg(pgid, 0)
            except (ProcessLookupError, PermissionError):
                return
            time.sleep(0.02)
