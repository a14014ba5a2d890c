"""Test settings: embedded by default; CI's second pass sets DATABASE_URL/REDIS_URL/CELERY_BROKER_URL."""

import os

from .base import *  # noqa: F403
from .base import BASE_DIR, TOOLHUB_LOCAL_SANDBOX_RO_PATHS, VAR_DIR

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
# Tests start their own servers on loopback; nothing else is reachable.
TOOLHUB_OUTBOUND_ALLOW = "127.0.0.0/8,::1"
TOOLHUB_WORKSPACE_ROOT = VAR_DIR / "test-workspace"
TOOLHUB_TEST_CELERY_WORKER = bool(os.environ.get("TOOLHUB_TEST_CELERY_WORKER"))
# Without a broker, tasks run inline; with one (CI), a real worker process consumes them.
CELERY_TASK_ALWAYS_EAGER = not os.environ.get("CELERY_BROKER_URL")
CELERY_TASK_EAGER_PROPAGATES = True
REST_FRAMEWORK = {**REST_FRAMEWORK}  # noqa: F405
REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"] = {"invoke": "10000/min", "chat": "10000/min", "test": "10000/min"}
# Tests discover explicitly (one test covers discovery-on-save), so counts are deterministic.
TOOLHUB_DISCOVER_ON_SAVE = False
# Whatever plugins the venv holds, a tenant gets the nine built-ins; plugin tests turn plugins on themselves.
TOOLHUB_TOOL_PLUGINS = []
TOOLHUB_AGENT_SQL_URL = f"sqlite:///{VAR_DIR / 'test-agent-demo.sqlite3'}"
# A file, not shared-cache memory: threads (health sweeps, parallel tool calls) then wait on the
# busy timeout instead of failing with "database table is locked".
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):  # noqa: F405
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test-db.sqlite3")}  # noqa: F405
TOOLHUB_MCP_WATCH_S = 0.2
# LOCAL servers the tests start run sandboxed like a tenant's: the fixture servers and the real third-party
# servers (var/test-servers) are the runtimes the operator mounts; nothing else of the tree is visible.
TOOLHUB_LOCAL_SANDBOX_RO_PATHS = [*TOOLHUB_LOCAL_SANDBOX_RO_PATHS, str(BASE_DIR / "tests" / "fixtures"),
                                  str(VAR_DIR / "test-servers"), str(BASE_DIR / "toolhub_demo" / "inventory_server.py")]
