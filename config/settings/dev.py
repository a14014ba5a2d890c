"""Local development: `make run` (embedded SQLite, in-process worker and beat, loopback allowed)."""

import os

from core.env import env_bool

from .base import *  # noqa: F403
from .base import BASE_DIR, TOOLHUB_LOCAL_SANDBOX_RO_PATHS, TOOLHUB_OUTBOUND_ALLOW

DEBUG = env_bool("DEBUG", True)
# The demo tools (inventory server, local catalog) live on this machine.
TOOLHUB_OUTBOUND_ALLOW = TOOLHUB_OUTBOUND_ALLOW or os.environ.get("TOOLHUB_OUTBOUND_ALLOW", "127.0.0.0/8,::1")
# The demo's LOCAL inventory server runs sandboxed like any tenant's: its one file is mounted read-only.
TOOLHUB_LOCAL_SANDBOX_RO_PATHS = [*TOOLHUB_LOCAL_SANDBOX_RO_PATHS, str(BASE_DIR / "toolhub_demo" / "inventory_server.py")]
