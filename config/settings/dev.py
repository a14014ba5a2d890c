"""Local development: `make run` (embedded SQLite, in-process worker and beat, loopback allowed)."""

import os

from .base import *  # noqa: F403
from .base import TOOLHUB_OUTBOUND_ALLOW, env_bool

DEBUG = env_bool("DEBUG", True)
# The demo tools (inventory server, local catalog) live on this machine.
TOOLHUB_OUTBOUND_ALLOW = TOOLHUB_OUTBOUND_ALLOW or os.environ.get("TOOLHUB_OUTBOUND_ALLOW", "127.0.0.0/8,::1")
