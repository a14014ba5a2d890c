"""Settings shared by every environment; everything site-specific comes from the environment."""

from __future__ import annotations

import ipaddress
import os
import sys
from pathlib import Path

import dj_database_url
import django_stubs_ext
from django.core.exceptions import ImproperlyConfigured

from core.env import env_bool, env_choice, env_float, env_int, env_list, env_path, env_str
from core.outbound import parse_allow

# Django's generic classes (ModelAdmin, ModelForm, Field, QuerySet ...) take their model as a type argument at run
# time as they do for the type checker.
django_stubs_ext.monkeypatch()

BASE_DIR = Path(__file__).resolve().parent.parent.parent
# Every variable below is read through core.env: typed, checked at startup, listed in docs/configuration.md.

# Where Toolhub keeps its files (SQLite database, dev key file, embedded broker, package store); every default
# under var/ follows it.
VAR_DIR = env_path("TOOLHUB_VAR_DIR", BASE_DIR / "var")


# Django's signing key (sessions, CSRF, signed links); production refuses to start without one.
SECRET_KEY = env_str("DJANGO_SECRET_KEY", "toolhub-dev-only-not-secret")
# Django's debug mode (detailed error pages, no static file caching); never in production.
DEBUG = env_bool("DEBUG", False)
# The debug page and error reports render no value that may hold a secret (tool configs, decrypted headers,
# OAuth client secrets in local variables; POST values; the query string), DEBUG or not: core/debug.py.
DEFAULT_EXCEPTION_REPORTER_FILTER = "core.debug.SecretSafeExceptionReporterFilter"
DEFAULT_EXCEPTION_REPORTER = "core.debug.SecretSafeExceptionReporter"
# Host names this deployment answers to (comma-separated); a request for another host gets 400.
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "127.0.0.1,localhost")
# Origins (scheme://host[:port], comma-separated) whose forms may post to the admin and sign-in pages, e.g.
# the public HTTPS origin behind a proxy.
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS")

INSTALLED_APPS = [
    "tenants_app.admin_apps.ToolhubAdminConfig",  # django.contrib.admin with Toolhub's site
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "core.apps.CoreConfig",  # before staticfiles: its `runserver` (TCP_NODELAY) replaces staticfiles' own
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI / ReDoc assets served locally
    "guardian",
    "oauth2_provider",  # the MCP gateway's authorization server (agents_app.gateway.oauth)
    "tenants_app",
    "tools_app",
    "tools_app.packages.apps.PackagesConfig",  # the package store LOCAL servers run from (own models, migrations)
    "agents_app",
    "market_app",
    "identity_app",  # company sign-in (OpenID Connect) and SCIM: above tenants, tools and agents
    "toolhub_demo",
]

MIDDLEWARE = [
    "core.logging.RequestIdMiddleware",
    "core.http_tracing.TracingMiddleware",  # only with an OTLP endpoint (core.tracing); else it removes itself
    "django.middleware.security.SecurityMiddleware",
    # Static files (admin, API docs) straight from the web process; no separate file server needed.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "core.api_root.ApiNotFoundMiddleware",  # the JSON 404 for /api/ paths under DEBUG too
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "core.messages.LazyMessageMiddleware",  # Django's, building its storage only when a message is used
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"
ASGI_APPLICATION = "config.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]

DATABASES = {
    "default": dj_database_url.parse(
        # The database (postgres://... or sqlite:///...); empty: a SQLite file under TOOLHUB_VAR_DIR.
        env_str("DATABASE_URL", f"sqlite:///{VAR_DIR / 'toolhub.sqlite3'}"),
        # Seconds a database connection is kept for the next request (0: closed after each); SQLite keeps its
        # own for 300 s when unset.
        conn_max_age=env_int("DB_CONN_MAX_AGE", 0),
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets the embedded worker and the web process share the file without "database is locked".
    DATABASES["default"].setdefault("OPTIONS", {})
    # IMMEDIATE: a write transaction takes the write lock at BEGIN and waits (busy timeout) for it,
    # instead of failing with "database is locked" when a read lock cannot be upgraded mid-transaction.
    DATABASES["default"]["OPTIONS"].update(
        {
            "timeout": 20,
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            "transaction_mode": "IMMEDIATE",
        }
    )
    if "DB_CONN_MAX_AGE" not in os.environ:
        # Keep each thread's connection: opening one runs the PRAGMAs above and closing the last one
        # checkpoints the WAL, which cost several ms on every request and every gateway call.
        DATABASES["default"]["CONN_MAX_AGE"] = 300

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTHENTICATION_BACKENDS = [
    # ModelBackend that refuses passwords of members whose tenant enforces company sign-in (identity_app).
    "identity_app.backends.PasswordBackend",
    "guardian.backends.ObjectPermissionBackend",
]
ANONYMOUS_USER_NAME = None  # guardian: no anonymous user row
# Every member signs in at /accounts/login/ (tenants_app.accounts); the admin keeps its own staff login.
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "/playground/"
# The absolute base of every link Toolhub hands out (OAuth authorize and callback links, client configs);
# empty: the origin of the request that asks for the link.
TOOLHUB_PUBLIC_URL = env_str("TOOLHUB_PUBLIC_URL", "").strip()

# Open client registration (RFC 7591) per address and hour; 0: unlimited.
TOOLHUB_OAUTH_REGISTRATIONS_PER_HOUR = env_int("TOOLHUB_OAUTH_REGISTRATIONS_PER_HOUR", 30)
# How long a started OAuth connect of a REMOTE tool (its state and PKCE verifier) waits for the provider (seconds).
TOOLHUB_OAUTH_FLOW_TTL_S = env_int("TOOLHUB_OAUTH_FLOW_TTL_S", 600)
# Lifetime of an OAuth access token the gateway accepts (seconds).
TOOLHUB_OAUTH_ACCESS_TOKEN_S = env_int("TOOLHUB_OAUTH_ACCESS_TOKEN_S", 3600)
# Lifetime of an OAuth refresh token (seconds); each use rotates it.
TOOLHUB_OAUTH_REFRESH_TOKEN_S = env_int("TOOLHUB_OAUTH_REFRESH_TOKEN_S", 30 * 24 * 3600)
# Toolhub as the MCP gateway's OAuth 2.1 authorization server (django-oauth-toolkit, agents_app.gateway.oauth):
# authorization code + PKCE S256 for public clients registered dynamically, one agent per token (RFC 8707),
# refresh tokens rotated (a reused one revokes its family), tokens stored hashed.
OAUTH2_PROVIDER = {
    "SCOPES": {"mcp": "List and call this agent's functions as you"},
    "DEFAULT_SCOPES": ["mcp"],
    "OAUTH2_SERVER_CLASS": "agents_app.gateway.oauth.server.GatewayServer",
    "OAUTH2_VALIDATOR_CLASS": "agents_app.gateway.oauth.validator.GatewayValidator",
    "PKCE_REQUIRED": True,
    "ALLOWED_REDIRECT_URI_SCHEMES": ["http", "https"],
    "AUTHORIZATION_CODE_EXPIRE_SECONDS": 60,
    "ACCESS_TOKEN_EXPIRE_SECONDS": TOOLHUB_OAUTH_ACCESS_TOKEN_S,
    "REFRESH_TOKEN_EXPIRE_SECONDS": TOOLHUB_OAUTH_REFRESH_TOKEN_S,
    "ROTATE_REFRESH_TOKEN": True,
    "REFRESH_TOKEN_REUSE_PROTECTION": True,
    "REQUEST_APPROVAL_PROMPT": "force",
    "DCR_ENABLED": True,
    "DCR_REGISTRATION_PERMISSION_CLASSES": ("oauth2_provider.dcr.AllowAllDCRPermission",),
    # Client ID Metadata Documents (https client ids), fetched through Toolhub's outbound guard.
    "CIMD_ENABLED": True,
    "CIMD_METADATA_FETCHER": "agents_app.gateway.oauth.client_documents.GuardedMetadataFetcher",
    "COMPLIANT_BCP_RFC9700_IMPLICIT_GRANT": True,
    "COMPLIANT_BCP_RFC9700_PASSWORD_GRANT": True,
    "COMPLIANT_BCP_RFC9700_PKCE_METHOD": True,
    "COMPLIANT_BCP_RFC9700_TOKEN_STORAGE": True,
    "COMPLIANT_BCP_RFC9700_ACCESS_TOKEN_TRANSPORT": True,
    "COMPLIANT_BCP_RFC9700_REFRESH_TOKEN": True,
    # http redirect URIs are accepted on loopback addresses only (desktop clients, RFC 8252): registration checks.
    "COMPLIANT_BCP_RFC9700_REDIRECT_URI_SCHEME": False,
    "COMPLIANT_BCP_RFC9700_AUTHZ_RESPONSE_ISS": True,
    # The `iss` of authorization responses (RFC 9207) is the metadata's issuer: the public base when configured.
    "OIDC_ISS_ENDPOINT": TOOLHUB_PUBLIC_URL.rstrip("/"),
    "COMPLIANT_BCP_RFC9700_REDIRECT_URI_MATCHING": True,
    "COMPLIANT_BCP_RFC9700_PKCE_REQUIRED": True,
}

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
# WhiteNoise serves from here after collectstatic; core.apps makes the folders settings name (none at import).

# Request bodies are capped (a larger one is refused with a typed error before it is read), and so is their
# nesting (core.parsers).
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("TOOLHUB_MAX_BODY_BYTES", 2 * 1024 * 1024)
# Deepest nesting a JSON request body may have; a deeper one is refused before any view runs.
TOOLHUB_MAX_JSON_DEPTH = env_int("TOOLHUB_MAX_JSON_DEPTH", 512)

# Token -> user and user + tenant -> membership are cached this long (0 = off); any change to them forgets all.
TOOLHUB_AUTH_CACHE_S = env_int("TOOLHUB_AUTH_CACHE_S", 30)
# Invoke's tool/function reads and the gateway's principal and toolset are kept in process memory this long
# at most (0 = off); any change to a tenant's tools, functions, agents, links or grants drops them at once
# in every process (core.hotcache).
TOOLHUB_HOT_CACHE_S = env_int("TOOLHUB_HOT_CACHE_S", 60)

# core.api resolves the request tenant through this (core imports no app).
TOOLHUB_TENANT_RESOLVER = "tenants_app.resolution.resolve_tenant"
# tools_app.policies.CALLS asks this for the agent half of "may this call run" (tools import no agents).
TOOLHUB_AGENT_CALL_RULE = "agents_app.policies.AGENT_CALLS"

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "tenants_app.auth_cache.CachedTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PAGINATION_CLASS": "core.pagination.Pagination",
    # JSON bodies deeper than TOOLHUB_MAX_JSON_DEPTH are refused before any view runs (nothing written).
    "DEFAULT_PARSER_CLASSES": [
        "core.parsers.JSONParser",
        "core.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "PAGE_SIZE": 20,
    "EXCEPTION_HANDLER": "core.exceptions.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_FILTER_BACKENDS": [],
    "DEFAULT_THROTTLE_RATES": {
        # Direct invokes per token (DRF rate such as 600/min); past it, 429 with Retry-After.
        "invoke": env_str("TOOLHUB_THROTTLE_INVOKE", "600/min"),
        # Chat turns per token (DRF rate such as 120/min); past it, 429 with Retry-After.
        "chat": env_str("TOOLHUB_THROTTLE_CHAT", "120/min"),
        # Tool Tests (a real connection each) per token (DRF rate such as 60/min); past it, 429 with
        # Retry-After.
        "test": env_str("TOOLHUB_THROTTLE_TEST", "60/min"),
    },
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Toolhub API",
    "DESCRIPTION": "Tools, agents and the MCP market, scoped to the tenant in X-Tenant.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    # The docs pages load Swagger UI and ReDoc from our static files, never a CDN (they work offline).
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "ENUM_NAME_OVERRIDES": {
        "ToolStatusEnum": "tools_app.models.ToolStatus",
        "CallStatusEnum": "tools_app.models.CallStatus",
        "ApprovalStatusEnum": "tools_app.models.ApprovalStatus",
        "EntryStatusEnum": "market_app.models.EntryStatus",
        "ConversationStatusEnum": "agents_app.models.ConversationStatus",
        "CatalogFormatEnum": "market_app.models.CatalogFormat",
        "ExportFormatEnum": [("json", "json"), ("yaml", "yaml")],
        "IntentKindEnum": "agents_app.models.IntentKind",
        "IntentLevelEnum": "agents_app.models.IntentLevel",
        # IntentStatus has ToolStatus's choices (ENABLED, DISABLED): one choice set takes one name, ToolStatusEnum.
    },
}

# Secrets: newest key first; a dev key file is generated when the variable is unset.
TOOLHUB_SECRET_KEYS = env_list("TOOLHUB_SECRET_KEYS")
# The generated encryption key used when TOOLHUB_SECRET_KEYS is unset (dev only; production requires the
# variable).
TOOLHUB_DEV_KEY_FILE = env_path("TOOLHUB_DEV_KEY_FILE", VAR_DIR / "dev-secret.key")

# Redis for the cache, sessions of the gateway, quota counters, runner placement and Celery results; empty:
# in-process memory (one process only).
REDIS_URL = env_str("REDIS_URL", "")
CACHES = {
    "default": (
        # One connection pool per process (core.cache): Django's own makes one per request under ASGI.
        {"BACKEND": "core.cache.SharedPoolRedisCache", "LOCATION": REDIS_URL}
        if REDIS_URL
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
    )
}

# Celery: Redis (or any broker URL) when set, otherwise an embedded filesystem broker under var/,
# so `make run` needs no server.
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", "")
# Where Celery keeps task results; empty: REDIS_URL, or files under var/ with the embedded broker.
_RESULT_BACKEND = env_str("CELERY_RESULT_BACKEND", "")
CELERY_RESULT_BACKEND = _RESULT_BACKEND or REDIS_URL or None
# Run Celery tasks inline in the calling process instead of on a worker (tests).
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celery-beat-schedule")
if not CELERY_BROKER_URL:
    _queue = VAR_DIR / "celery" / "queue"
    CELERY_BROKER_URL = "filesystem://"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_queue),
        "data_folder_out": str(_queue),
        # kombu's default is ./control relative to the working directory: keep its state under var/.
        "control_folder": str(VAR_DIR / "celery" / "control"),
        "store_processed": False,
    }
    CELERY_RESULT_BACKEND = _RESULT_BACKEND or f"file://{VAR_DIR / 'celery' / 'results'}"
CELERY_BEAT_SCHEDULE: dict[str, dict[str, object]] = {
    "tools-health": {
        "task": "tools.check_health",
        # How often beat checks the health of enabled LOCAL and REMOTE tools (seconds).
        "schedule": env_float("TOOLHUB_HEALTH_INTERVAL_S", 60),
    },
    "market-refresh-due": {
        "task": "market.dispatch_due_refreshes",
        "schedule": 60.0,
    },
    "approvals-expire": {
        "task": "tools.expire_approvals",
        "schedule": 60.0,
    },
    "audit-spool-replay": {
        "task": "tools.replay_audit_spool",
        # How often beat replays audit rows spooled while the database was away (seconds).
        "schedule": env_float("TOOLHUB_AUDIT_SPOOL_REPLAY_S", 30),
    },
    "quota-refusals-fold": {
        "task": "tools.fold_quota_refusals",
        # How often beat writes the quota refusals counted in Redis into the audit table, one row per member, tool
        # and function per UTC minute (tools_app.services.quota_refusals; seconds).
        "schedule": env_float("TOOLHUB_QUOTA_FOLD_S", 30),
    },
    "abandoned-input-sweep": {
        "task": "tools.sweep_abandoned_input",
        # Calls awaiting a caller's input past their requestState's expiry end as abandoned
        # (tools_app.services.abandoned_input).
        "schedule": 60.0,
    },
    "oauth-clients-prune": {
        "task": "agents.prune_oauth_clients",
        "schedule": 3600.0,
    },
}

# Runtime limits and policies.

# Addresses (comma-separated CIDRs) the outbound guard lets tools, HTTP tools and market refreshes reach
# although private, loopback or link-local; empty: none.
TOOLHUB_OUTBOUND_ALLOW = env_str("TOOLHUB_OUTBOUND_ALLOW", "")
try:
    # Checked at startup: a host name where a CIDR belongs would otherwise be a 500 on the first chat.
    parse_allow(TOOLHUB_OUTBOUND_ALLOW)
except ValueError as _exc:
    raise ImproperlyConfigured(str(_exc)) from None
# Largest response body an outbound request may read (bytes); a larger one fails the request.
TOOLHUB_OUTBOUND_MAX_BYTES = env_int("TOOLHUB_OUTBOUND_MAX_BYTES", 5 * 1024 * 1024)
# Longest an outbound request (REMOTE tools, HTTP tools, OAuth, market) may take (seconds).
TOOLHUB_OUTBOUND_TIMEOUT_S = env_float("TOOLHUB_OUTBOUND_TIMEOUT_S", 30)
# Consecutive failed calls or health checks after which a tool is disabled for the cool-down.
TOOLHUB_BREAKER_THRESHOLD = env_int("TOOLHUB_BREAKER_THRESHOLD", 3)
# How long a tool the breaker tripped stays disabled (seconds); a success or a config change resets it.
TOOLHUB_BREAKER_COOLDOWN_S = env_int("TOOLHUB_BREAKER_COOLDOWN_S", 300)
# A pooled MCP session unused this long is closed (seconds).
TOOLHUB_POOL_IDLE_TTL_S = env_float("TOOLHUB_POOL_IDLE_TTL_S", 300)
# Most MCP sessions one tenant may hold open in a process (or runner) at once.
TOOLHUB_POOL_MAX_PER_TENANT = env_int("TOOLHUB_POOL_MAX_PER_TENANT", 20)
# Most MCP sessions (and LOCAL child processes) a process (or runner) holds open at once.
TOOLHUB_POOL_MAX_TOTAL = env_int("TOOLHUB_POOL_MAX_TOTAL", 100)
# Fair shares of a process's (a runner's) server slots: a tenant holds at most max(1, TOOLHUB_POOL_MAX_TOTAL //
# (tenants holding slots + 1)) (and TOOLHUB_POOL_MAX_PER_TENANT), a share kept free for a tenant that arrives, and
# a tenant at its share makes room among its own idle servers only. Off: TOOLHUB_POOL_MAX_PER_TENANT alone.
TOOLHUB_POOL_FAIR_SHARE = env_bool("TOOLHUB_POOL_FAIR_SHARE", True)
# Rounds a 2026-07-28 upstream may answer one call with input_required (questions, sampling, roots) before the call
# fails with input_rounds_exceeded.
TOOLHUB_MCP_INPUT_ROUNDS = env_int("TOOLHUB_MCP_INPUT_ROUNDS", 10, minimum=1)
# How long a LOCAL (stdio) server's first server/discover probe may go unanswered before the 2025 handshake is tried
# (a server silent on methods it does not know would otherwise cost the SDK's 10 s); the era found is remembered per
# tool revision in each process.
TOOLHUB_MCP_STDIO_DISCOVER_S = env_float("TOOLHUB_MCP_STDIO_DISCOVER_S", 2.0, minimum=0.1)
# Characters of a call's result kept in its audit row (the full size is recorded beside it).
TOOLHUB_AUDIT_RESULT_CHARS = env_int("TOOLHUB_AUDIT_RESULT_CHARS", 2000)
# Audit rows of calls that ran while the database was away wait here (one JSON file each, already redacted) until
# replayed (tools_app.services.audit_spool). Every process of one deployment should see the same directory.
TOOLHUB_AUDIT_SPOOL_DIR = env_path("TOOLHUB_AUDIT_SPOOL_DIR", VAR_DIR / "audit-spool")
# At most this many spooled rows are replayed after a process's next successful audit write (beat does the rest).
TOOLHUB_AUDIT_SPOOL_REPLAY_BATCH = env_int("TOOLHUB_AUDIT_SPOOL_REPLAY_BATCH", 50)
# Where tenant workspaces live (one folder per tenant): the file built-ins' and LOCAL servers' only writable
# place.
TOOLHUB_WORKSPACE_ROOT = env_path("TOOLHUB_WORKSPACE_ROOT", BASE_DIR / "workspace")
# The DATABASES alias the SQL built-ins query, when settings define it; otherwise TOOLHUB_AGENT_SQL_URL.
TOOLHUB_AGENT_SQL_DB = env_str("TOOLHUB_AGENT_SQL_DB", "agent_sql")
# The database the SQL built-ins query when no TOOLHUB_AGENT_SQL_DB alias is defined (the demo's records by
# default).
TOOLHUB_AGENT_SQL_URL = env_str("TOOLHUB_AGENT_SQL_URL", f"sqlite:///{VAR_DIR / 'agent_demo.sqlite3'}")
# Tables the SQL built-ins may read (comma-separated) for tenants that set no list of their own.
TOOLHUB_SQL_ALLOWED_TABLES = env_list("TOOLHUB_SQL_ALLOWED_TABLES", "customers,products,orders")
# Tool plugins (the `toolhub.tools` entry-point group) offered to tenants: distribution or entry-point names,
# comma-separated; `*` = every installed plugin, empty = none.
TOOLHUB_TOOL_PLUGINS = env_list("TOOLHUB_TOOL_PLUGINS", "*")
# Empty = RuoYi's list minus interpreters (tools_app.runtime.builtins.command_rules.DEFAULT_ALLOWLIST).
TOOLHUB_COMMAND_ALLOWLIST = env_list("TOOLHUB_COMMAND_ALLOWLIST")
# execute_command runs inside bubblewrap (no network, read-only system, the workspace the only writable
# path). Only the exact value `off` disables it, and startup then logs a WARNING; a missing bwrap fails calls.
TOOLHUB_COMMAND_SANDBOX = env_str("TOOLHUB_COMMAND_SANDBOX", "on").strip().lower() != "off"
# The bubblewrap binary execute_command and LOCAL servers run under.
TOOLHUB_COMMAND_SANDBOX_BWRAP = env_str("TOOLHUB_COMMAND_SANDBOX_BWRAP", "/usr/bin/bwrap")
# Extra host folders mounted read-only in the sandbox (colon-separated), e.g. /opt/node; their bin/ joins PATH.
TOOLHUB_COMMAND_SANDBOX_RO_PATHS = [p for p in env_str("TOOLHUB_COMMAND_SANDBOX_RO_PATHS", "").split(":") if p]
# LOCAL MCP servers are tenant code: each runs in its tenant's bubblewrap sandbox (its own uid, the tenant workspace
# as cwd and only writable path, nothing of Toolhub's files, environment or processes, no network unless the tenant's
# policy grants it). Only the exact value `off` runs them as Toolhub's own user (startup then logs a WARNING).
TOOLHUB_LOCAL_SANDBOX = env_str("TOOLHUB_LOCAL_SANDBOX", "on").strip().lower() != "off"
# Runtimes servers need, mounted read-only at their own paths (colon-separated; files or folders): this Python (its
# installation and virtualenv) always; add e.g. /opt/node, a uv tools folder, a venv holding MCP server packages.
TOOLHUB_LOCAL_SANDBOX_RO_PATHS = list(dict.fromkeys(
    # Extra runtimes LOCAL servers need, mounted read-only at their own paths (colon-separated): this Python
    # always; add e.g. /opt/node, a uv tools folder.
    [sys.base_prefix, sys.prefix] + [p for p in env_str("TOOLHUB_LOCAL_SANDBOX_RO_PATHS", "").split(":") if p]
))
# Tenant N's servers run as uid BASE + N inside their sandbox.
TOOLHUB_LOCAL_SANDBOX_UID_BASE = env_int("TOOLHUB_LOCAL_SANDBOX_UID_BASE", 100000)
# Memory of all of a tenant's sandboxed processes together: a cgroup per tenant where the host allows one
# (TOOLHUB_SANDBOX_CGROUP names a writable cgroup, else Toolhub's own v1 memory cgroup is used if writable); a
# tenant's `local_memory_mb` overrides it. An address-space cap per server process only when set (0 = none): Node
# reserves ~10 GiB of address space per WebAssembly memory, so a cap that fits memory breaks Node servers.
TOOLHUB_LOCAL_SANDBOX_PROCESS_MB = env_int("TOOLHUB_LOCAL_SANDBOX_PROCESS_MB", 0)
# Memory all of one tenant's sandboxed processes may use together (MiB), where a cgroup is available.
TOOLHUB_SANDBOX_TENANT_MEMORY_MB = env_int("TOOLHUB_SANDBOX_TENANT_MEMORY_MB", 4096)
# A writable (on cgroup v2, delegated) cgroup under which each tenant's sandboxed processes get their own;
# empty: Toolhub's own v1 memory cgroup if writable.
TOOLHUB_SANDBOX_CGROUP = env_str("TOOLHUB_SANDBOX_CGROUP", "") or None
# Who may register LOCAL commands: `any` (every tenant admin; sandboxed), `approved` (tenant admins only the
# operator's list below or entries of global market sources; superusers anything), `off` (superusers only).
TOOLHUB_LOCAL_COMMANDS = env_choice("TOOLHUB_LOCAL_COMMANDS", "any", ("any", "approved", "off"))
# The operator-approved LOCAL commands for `approved`: `;`-separated command lines, each an exact command plus
# the leading arguments a tool must start with, e.g. "npx -y @modelcontextprotocol/server-memory@2026.1.26".
TOOLHUB_LOCAL_APPROVED_COMMANDS = [c.strip() for c in env_str("TOOLHUB_LOCAL_APPROVED_COMMANDS", "").split(";")
                                   if c.strip()]
# Package runners (docs/packages.md): a LOCAL tool whose command is `npx`, `uvx`, `pipx run`, `npm exec` or `bunx` runs
# the package Toolhub installed into the store, outside the sandbox; off runs such commands as written.
TOOLHUB_PACKAGES = env_bool("TOOLHUB_PACKAGES", True)
# Where installed packages live, one read-only folder per package@version, mounted read-only in the sandbox. Runners
# on other hosts must see the same folder at the same path (a shared volume, docs/production.md).
TOOLHUB_PACKAGE_STORE = str(env_path("TOOLHUB_PACKAGE_STORE", VAR_DIR / "packages"))
# Registry hosts installs may contact (comma-separated); empty: registry.npmjs.org, pypi.org, files.pythonhosted.org
# and the hosts of npm's configured registry and pip's configured indexes.
TOOLHUB_PACKAGE_REGISTRY_HOSTS = env_list("TOOLHUB_PACKAGE_REGISTRY_HOSTS")
# Install a tool's package as soon as it is saved (a Celery task); off: at its first Test or call.
TOOLHUB_PACKAGE_INSTALL_ON_SAVE = env_bool("TOOLHUB_PACKAGE_INSTALL_ON_SAVE", True)
# How long one install may take; Test and calls wait this long for an install in progress.
TOOLHUB_PACKAGE_INSTALL_TIMEOUT_S = env_int("TOOLHUB_PACKAGE_INSTALL_TIMEOUT_S", 600)
# How long asking a registry which version a package resolves to may take.
TOOLHUB_PACKAGE_RESOLVE_TIMEOUT_S = env_int("TOOLHUB_PACKAGE_RESOLVE_TIMEOUT_S", 10)
# A failed install is tried again by the next Test or call only after this long (a misspelling fails at once anyway).
TOOLHUB_PACKAGE_RETRY_S = env_int("TOOLHUB_PACKAGE_RETRY_S", 60)
# The runner tier: LOCAL servers live in runner processes (`manage.py toolhub_runner`), each server key on exactly one
# runner in the whole deployment. `redis`: runners announce themselves in REDIS_URL and web processes and workers
# call them over HTTP with TOOLHUB_RUNNER_SECRET; empty (default, `make run`, tests): servers run in each process.
TOOLHUB_RUNNERS = env_choice("TOOLHUB_RUNNERS", "", ("", "redis"))
# The shared secret web processes and workers call runners with (required with TOOLHUB_RUNNERS=redis).
TOOLHUB_RUNNER_SECRET = env_str("TOOLHUB_RUNNER_SECRET", "")
# A runner that has not announced itself for this long is taken for dead and its servers start elsewhere
# (seconds).
TOOLHUB_RUNNER_TTL_S = env_float("TOOLHUB_RUNNER_TTL_S", 10)
# How often a runner renews its announcement, in seconds; 0: a third of TOOLHUB_RUNNER_TTL_S. Below the TTL: a runner
# starved for longer than TTL minus this counts as gone (a dead runner is noticed sooner, by its refused connection).
TOOLHUB_RUNNER_HEARTBEAT_S = env_float("TOOLHUB_RUNNER_HEARTBEAT_S", 0)
# How long a runner keeps an unused server whose key another live runner owns now (placed on it while the owner was
# away) before closing it, in seconds; at least two heartbeats (a web process may still hold the older list).
TOOLHUB_RUNNER_UNOWNED_IDLE_S = env_float("TOOLHUB_RUNNER_UNOWNED_IDLE_S", 5)
# A runner runs a LOCAL server without a sandbox (an operator's `unsandboxed` tool) only when its own settings say so.
TOOLHUB_RUNNER_ALLOW_UNSANDBOXED = env_bool("TOOLHUB_RUNNER_ALLOW_UNSANDBOXED", False)
# Quota counters (tools_app.services.quotas) live in REDIS_URL under this prefix; without REDIS_URL, in the process.
TOOLHUB_QUOTA_PREFIX = env_str("TOOLHUB_QUOTA_PREFIX", "toolhub:quota:")
# With REDIS_URL, a quota refusal after the first of its minute (per member, tool, function, agent and path) is
# counted in Redis instead of written as its own audit row, and the minute's count is written as one row once the
# minute is over (beat, every TOOLHUB_QUOTA_FOLD_S): saturating a quota costs no database write per refused call.
# Off: every refusal is its own row.
TOOLHUB_QUOTA_FOLD_REFUSALS = env_bool("TOOLHUB_QUOTA_FOLD_REFUSALS", True)
# The audit stream (tools_app.services.audit_stream, docs/operators.md): where `manage.py toolhub_audit_ship` sends
# every call's audit record (file:/path, syslog://host:port, syslog+tcp://host:port, http(s)://...); empty: off.
TOOLHUB_AUDIT_STREAM = env_str("TOOLHUB_AUDIT_STREAM", "")
# HTTP audit-stream sinks: sent as a Bearer token.
TOOLHUB_AUDIT_STREAM_TOKEN = env_str("TOOLHUB_AUDIT_STREAM_TOKEN", "")  # HTTP sinks: sent as a Bearer token
# Audit records `toolhub_audit_ship` sends per batch.
TOOLHUB_AUDIT_STREAM_BATCH = env_int("TOOLHUB_AUDIT_STREAM_BATCH", 500)
# How long `toolhub_audit_ship` waits for new audit records when it has sent everything (seconds).
TOOLHUB_AUDIT_STREAM_INTERVAL_S = env_float("TOOLHUB_AUDIT_STREAM_INTERVAL_S", 2.0)
# Tool search (agents_app.gateway.search): an agent's `auto` turns it on from this many functions; with it on,
# tools/list shows this many of the agent's most used functions beside search_functions and call.
TOOLHUB_TOOL_SEARCH_AUTO_FROM = env_int("TOOLHUB_TOOL_SEARCH_AUTO_FROM", 40)
# With tool search on, how many of the agent's most used functions tools/list shows beside search_functions
# and call.
TOOLHUB_TOOL_SEARCH_PINNED = env_int("TOOLHUB_TOOL_SEARCH_PINNED", 5)
if TOOLHUB_RUNNERS and not (REDIS_URL and TOOLHUB_RUNNER_SECRET):
    raise ImproperlyConfigured("TOOLHUB_RUNNERS=redis needs REDIS_URL and TOOLHUB_RUNNER_SECRET")
# Rediscover an MCP tool's functions in the background after it is created or its config changes.
TOOLHUB_DISCOVER_ON_SAVE = env_bool("TOOLHUB_DISCOVER_ON_SAVE", True)
TOOLHUB_HEALTH_INTERVAL_S = env_int("TOOLHUB_HEALTH_INTERVAL_S", 60)
# Tools one health sweep checks at once.
TOOLHUB_HEALTH_CONCURRENCY = env_int("TOOLHUB_HEALTH_CONCURRENCY", 16)
# Largest market catalog a refresh may download (bytes).
TOOLHUB_MARKET_MAX_BYTES = env_int("TOOLHUB_MARKET_MAX_BYTES", 5 * 1024 * 1024)
# Longest one market catalog download may take (seconds).
TOOLHUB_MARKET_TIMEOUT_S = env_float("TOOLHUB_MARKET_TIMEOUT_S", 30)
# One refresh of a source at a time: a refresh holds the source this long at most (seconds) before another may
# start.
TOOLHUB_MARKET_REFRESH_LEASE_S = env_int("TOOLHUB_MARKET_REFRESH_LEASE_S", 600)
# A pending approval nobody decided expires after this long (seconds).
TOOLHUB_APPROVAL_TTL_S = env_int("TOOLHUB_APPROVAL_TTL_S", 3600)
# Characters of a tool result the chat sends to the model (the rest is cut, saying so).
TOOLHUB_TOOL_RESULT_CHARS = env_int("TOOLHUB_TOOL_RESULT_CHARS", 8000)
# Chat: the model call timeout; the demo model (`make run` starts it when set empty) is fixed rules, not an AI.
TOOLHUB_MODEL_TIMEOUT_S = env_float("TOOLHUB_MODEL_TIMEOUT_S", 60)
# The demo model's OpenAI-compatible URL (`make run` starts it and sets this); chat uses it for agents without
# a model.
TOOLHUB_DEMO_MODEL_URL = env_str("TOOLHUB_DEMO_MODEL_URL", "")
# The demo catalog URL and seed (`make run`); production turns it off whatever the environment says.
TOOLHUB_DEMO_ENABLED = env_bool("TOOLHUB_DEMO", True)

def _networks(name: str, items: list[str]) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    try:
        return [ipaddress.ip_network(item, strict=False) for item in items]
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name}: {exc}; expected comma-separated CIDRs such as 10.0.0.0/8,::1") from None


# GET /metrics: a Bearer token, or a client address in the allowlist (default: this machine only).
TOOLHUB_METRICS_TOKEN = env_str("TOOLHUB_METRICS_TOKEN", "")
# Client addresses (comma-separated CIDRs) that may read GET /metrics without the token.
_METRICS_ALLOW = env_list("TOOLHUB_METRICS_ALLOW", "127.0.0.1/32,::1/128")
TOOLHUB_METRICS_ALLOW = _networks("TOOLHUB_METRICS_ALLOW", _METRICS_ALLOW)

# Logs: one JSON object per line with request_id and call_id (TOOLHUB_LOG_FORMAT=text for a terminal).
TOOLHUB_LOG_FORMAT = env_choice("TOOLHUB_LOG_FORMAT", "json", ("json", "text"))
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    # Every log line passes the one scrubber: secrets this process handles never reach a log.
    "filters": {"context": {"()": "core.logging.ContextFilter"},
                "scrub_secrets": {"()": "core.secrets.SecretLogFilter"}},
    "formatters": {
        "json": {"()": "core.logging.JsonFormatter"},
        "text": {"format": "%(asctime)s %(levelname)s %(name)s [%(request_id)s %(call_id)s] %(message)s"},
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "filters": ["context", "scrub_secrets"],
            "formatter": "text" if TOOLHUB_LOG_FORMAT == "text" else "json",
        }
    },
    # The root log level.
    "root": {"handlers": ["console"], "level": env_choice("LOG_LEVEL", "INFO", ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"))},
    # HTTP client libraries log full request URLs at INFO; an HTTP tool's URL may carry a secret.
    # oauthlib and django-oauth-toolkit log request bodies and redirect URLs (codes, tokens) at DEBUG.
    "loggers": {name: {"level": "WARNING"} for name in ("httpx", "httpx2", "httpcore", "openai", "mcp", "oauthlib",
                                                        "oauth2_provider")},
}

# MCP gateway (/mcp/<tenant>/agents/<id>/). Sessions are recorded in the cache (Redis in production), so
# any web process answers a session another opened (agents_app.gateway.sessions); only an elicitation's
# answer must reach the process that asked. TOOLHUB_MCP_STATELESS=1 drops sessions altogether (no GET
# stream, so no pushed list_changed; approvals always answer with the pending approval id).
TOOLHUB_MCP_STATELESS = env_bool("TOOLHUB_MCP_STATELESS", False)
# How often the gateway checks whether an agent's functions changed, to push list_changed to open sessions
# (seconds).
TOOLHUB_MCP_WATCH_S = env_float("TOOLHUB_MCP_WATCH_S", 2)
# A session nobody used for TOOLHUB_MCP_SESSION_IDLE_S ends and stops counting under the caps below.
TOOLHUB_MCP_SESSION_IDLE_S = env_float("TOOLHUB_MCP_SESSION_IDLE_S", 900)
# How long the gateway waits for a client's answer to an elicitation (an approval asked of the user)
# (seconds).
TOOLHUB_MCP_ELICIT_TIMEOUT_S = env_float("TOOLHUB_MCP_ELICIT_TIMEOUT_S", 300)
# Open sessions (streamable HTTP and SSE) one API token, and one member of a tenant, may hold at once. At a
# cap the least recently used session is closed to make room (never a lock-out: clients that reconnect or
# crash leave sessions behind); a use is noted at most once per TOOLHUB_MCP_SESSION_TOUCH_S per process.
TOOLHUB_MCP_MAX_SESSIONS_PER_TOKEN = env_int("TOOLHUB_MCP_MAX_SESSIONS_PER_TOKEN", 64)
# Open gateway sessions one member of a tenant may hold at once (the least recently used is closed at the
# cap).
TOOLHUB_MCP_MAX_SESSIONS_PER_MEMBER = env_int("TOOLHUB_MCP_MAX_SESSIONS_PER_MEMBER", 128)
# A session's use is noted at most once per this long per process (seconds).
TOOLHUB_MCP_SESSION_TOUCH_S = env_float("TOOLHUB_MCP_SESSION_TOUCH_S", 30)
# MCP 2026-07-28 clients hold no session: what a call needs between its rounds (an approval asked as an input
# request) rides in requestState, sealed with keys derived from these (default: TOOLHUB_SECRET_KEYS; newest
# first, every one opens) so every web process verifies it; it expires after the TTL.
TOOLHUB_MCP_REQUEST_STATE_KEYS = env_list("TOOLHUB_MCP_REQUEST_STATE_KEYS")
# A sealed requestState of a 2026-07-28 client expires after this long (seconds).
TOOLHUB_MCP_REQUEST_STATE_TTL_S = env_float("TOOLHUB_MCP_REQUEST_STATE_TTL_S", 900)
# The ttlMs of tools/list, prompts/list and resources/list for 2026-07-28 clients (cacheScope private); a
# listening client (subscriptions/listen) hears a change sooner.
TOOLHUB_MCP_LIST_TTL_MS = env_int("TOOLHUB_MCP_LIST_TTL_MS", 30000)
# A warm, plain tools/call (nothing to stream before its answer, no approval or input request possible) is answered
# by the gateway's own fast path (agents_app.gateway.fastcall) instead of the MCP SDK's server machinery: the same
# checks, call, audit row and answer, less CPU. Off (0): every request takes the SDK's path (an A/B and an escape
# hatch).
TOOLHUB_MCP_FASTCALL = env_bool("TOOLHUB_MCP_FASTCALL", True)
# A warm tools/call to a REMOTE server that speaks MCP 2026-07-28 over streamable HTTP (plain http, no OAuth, no
# progress asked) is sent by the calling worker thread itself on a kept-alive socket (tools_app.runtime.mcp.rawpost)
# instead of through the MCP session pool's event loop and the SDK's HTTP client: the same request and result, less
# CPU and two thread hand-offs fewer. Off (0): every call goes through the pool's loop (an A/B and an escape hatch).
TOOLHUB_MCP_RAW_POST = env_bool("TOOLHUB_MCP_RAW_POST", True)

# Intent routing (agents_app.intents): a turn whose best intent scores below the threshold gets the whole
# toolset, capped at the model's tool limit; intents within the margin of the best one all contribute.
TOOLHUB_INTENT_THRESHOLD = env_float("TOOLHUB_INTENT_THRESHOLD", 0.35)
# Intents scoring within this margin of the best one all contribute their functions.
TOOLHUB_INTENT_MARGIN = env_float("TOOLHUB_INTENT_MARGIN", 0.1)
# Most functions offered to a model in one turn (the fallback toolset is capped at it).
TOOLHUB_MODEL_TOOL_LIMIT = env_int("TOOLHUB_MODEL_TOOL_LIMIT", 128)
# A warm intent router re-reads its tree signature after a local write, or this often for other processes'.
TOOLHUB_INTENT_RECHECK_S = env_float("TOOLHUB_INTENT_RECHECK_S", 2)
# Examples without a stored vector that building an intent router embeds at once (the rest: the worker stores them).
TOOLHUB_INTENT_EMBED_ON_BUILD = env_int("TOOLHUB_INTENT_EMBED_ON_BUILD", 64)
