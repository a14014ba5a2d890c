"""Production: everything from the environment, secure cookies, keys required."""

import os

from django.core.exceptions import ImproperlyConfigured

from .base import *  # noqa: F403
from .base import TOOLHUB_SECRET_KEYS

DEBUG = False
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
SECURE_CONTENT_TYPE_NOSNIFF = True
if not TOOLHUB_SECRET_KEYS:
    raise ImproperlyConfigured("TOOLHUB_SECRET_KEYS must be set in production (comma-separated Fernet keys)")

# PostgreSQL through a bounded connection pool per process (psycopg_pool): a burst of requests waits for a
# connection instead of opening one each and exhausting the server's max_connections.
if DATABASES["default"]["ENGINE"].endswith("postgresql"):  # noqa: F405
    DATABASES["default"]["CONN_MAX_AGE"] = 0  # noqa: F405 (the pool owns connection lifetime)
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {  # noqa: F405
        "min_size": 1,
        "max_size": int(os.environ.get("TOOLHUB_DB_POOL_MAX", "8")),
        "timeout": float(os.environ.get("TOOLHUB_DB_POOL_TIMEOUT_S", "20")),
    }
