"""Production: everything from the environment, secure cookies, keys required."""


from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured

from core.env import env_bool, env_float, env_int, env_list, env_str

from .base import *  # noqa: F403
from .base import CELERY_BROKER_URL, CELERY_RESULT_BACKEND, REDIS_URL, TOOLHUB_SECRET_KEYS

DEBUG = False
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
SECURE_CONTENT_TYPE_NOSNIFF = True
if not TOOLHUB_SECRET_KEYS:
    raise ImproperlyConfigured("TOOLHUB_SECRET_KEYS must be set in production (comma-separated Fernet keys)")

# No fallbacks: a missing key or host list is a deployment mistake, said at startup, not a dev default.
SECRET_KEY = env_str("DJANGO_SECRET_KEY", "")
if not SECRET_KEY:
    raise ImproperlyConfigured(
        "DJANGO_SECRET_KEY must be set in production (a long random string, e.g. "
        "python -c 'import secrets; print(secrets.token_urlsafe(50))')"
    )
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS")
if not ALLOWED_HOSTS:
    raise ImproperlyConfigured(
        "ALLOWED_HOSTS must be set in production (comma-separated host names this site answers to, "
        "e.g. toolhub.example.com)"
    )

# Behind a TLS-terminating proxy (which must set X-Forwarded-Proto): redirect to HTTPS, send HSTS and
# trust the proxy's scheme header. Off by default: without such a proxy the header could be forged.
TOOLHUB_BEHIND_TLS_PROXY = env_bool("TOOLHUB_BEHIND_TLS_PROXY", False)
if TOOLHUB_BEHIND_TLS_PROXY:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = env_bool("TOOLHUB_SSL_REDIRECT", True)
    SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^metrics$"]
    SECURE_HSTS_SECONDS = env_int("TOOLHUB_HSTS_SECONDS", 31536000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("TOOLHUB_HSTS_INCLUDE_SUBDOMAINS", False)
    SECURE_HSTS_PRELOAD = False
# Redis decides where LOCAL calls go (runner announcements) and carries the task queue: whatever reaches it
# without a password (a tenant's LOCAL server on the host's network, a neighbour on the LAN) could redirect calls or
# queue tasks. Every Redis URL names a password (redis://:PASSWORD@host:port/db) or a unix socket.
for _name, _url in (("REDIS_URL", REDIS_URL), ("CELERY_BROKER_URL", CELERY_BROKER_URL),
                    ("CELERY_RESULT_BACKEND", CELERY_RESULT_BACKEND or "")):
    _parsed = urlsplit(_url)
    if _parsed.scheme in ("redis", "rediss") and not _parsed.password:
        raise ImproperlyConfigured(
            f"{_name} must carry the Redis password in production (redis://:PASSWORD@{_parsed.hostname or 'host'}:"
            f"{_parsed.port or 6379}{_parsed.path}; set `requirepass` in redis.conf): a Redis without one can be "
            "read and written by any process that reaches it, and it decides where LOCAL server calls go"
        )

SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"

# The demo (catalog URL, seed) is for `make run`, never a production site.
TOOLHUB_DEMO_ENABLED = False

# PostgreSQL through a bounded connection pool per process (psycopg_pool): a burst of requests waits for a
# connection instead of opening one each and exhausting the server's max_connections. A request holds one only
# while it queries (a chat gives its own back before each wait on the model, an invoke before its tool call:
# core.db), so 8 per worker serve far more than 8 users (128 in the load suite, 0 pool_exhausted); size it to
# PostgreSQL's max_connections (max x workers x processes, plus Celery and other clients), not to the number of users.
if DATABASES["default"]["ENGINE"].endswith("postgresql"):  # noqa: F405
    DATABASES["default"]["CONN_MAX_AGE"] = 0  # noqa: F405 (the pool owns connection lifetime)
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {  # noqa: F405
        "min_size": 1,
        "max_size": env_int("TOOLHUB_DB_POOL_MAX", 8),
        "timeout": env_float("TOOLHUB_DB_POOL_TIMEOUT_S", 20),
    }
