"""Test settings: embedded by default; CI's second pass sets DATABASE_URL/REDIS_URL/CELERY_BROKER_URL."""

import os
import sys
import tomllib
from pathlib import Path

from .base import *  # noqa: F403
from .base import BASE_DIR, TOOLHUB_LOCAL_SANDBOX_RO_PATHS, VAR_DIR

# One BLAS thread per test process (numpy is imported later, by django.setup(), and reads these once). The suite runs
# several processes on a machine with few cores: each BLAS call's threads spin waiting on cores the other processes
# hold, so a router build's eigendecomposition took 3.6 s instead of 0.2 s on this 2-core machine under load.
# Child processes the tests start (runners, servers, toolhub_run) inherit it.
for _blas_threads in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_blas_threads, "1")

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
# Tests start their own servers on loopback; nothing else is reachable.
TOOLHUB_OUTBOUND_ALLOW = "127.0.0.0/8,::1"
TOOLHUB_TEST_CELERY_WORKER = bool(os.environ.get("TOOLHUB_TEST_CELERY_WORKER"))
# Without a broker, tasks run inline; with one (CI), a real worker process consumes them.
CELERY_TASK_ALWAYS_EAGER = not os.environ.get("CELERY_BROKER_URL")
CELERY_TASK_EAGER_PROPAGATES = True
REST_FRAMEWORK = {**REST_FRAMEWORK}  # noqa: F405
REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"] = {"invoke": "10000/min", "chat": "10000/min", "test": "10000/min"}
TOOLHUB_OAUTH_REGISTRATIONS_PER_HOUR = 0  # tests register many clients from 127.0.0.1; one test sets a limit
# Tests discover explicitly (one test covers discovery-on-save), so counts are deterministic.
TOOLHUB_DISCOVER_ON_SAVE = False
# Whatever plugins the venv holds, a tenant gets the nine built-ins; plugin tests turn plugins on themselves.
TOOLHUB_TOOL_PLUGINS = []
# A run's quota counters in Redis never meet an earlier run's (test databases give tenants the same ids again).
TOOLHUB_QUOTA_PREFIX = f"toolhub:quota:test:{os.getpid()}:{os.urandom(4).hex()}:"


def _sample_plugin_on_path(source: Path, target: Path) -> None:
    """The sample plugin (examples/toolhub-sample-plugin) for the plugin tests, without installing it.

    Its metadata (name, version, `toolhub.tools` entry points, read from its pyproject) is written to
    `target`, and `target` plus its `src/` go first on sys.path of test processes only: the `.venv` that
    `make run` serves never holds it, so real tenants never get `sample_*` tools from a test run.
    """
    project = tomllib.loads((source / "pyproject.toml").read_text())["project"]
    name, version = project["name"], project["version"]
    info = target / f"{name.replace('-', '_')}-{version}.dist-info"
    files = {
        "METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        "entry_points.txt": "".join(
            f"[{group}]\n" + "".join(f"{key} = {value}\n" for key, value in points.items()) + "\n"
            for group, points in project.get("entry-points", {}).items()),
    }
    info.mkdir(parents=True, exist_ok=True)
    for filename, text in files.items():
        path = info / filename
        if not path.exists() or path.read_text() != text:
            tmp = path.with_suffix(f".{os.getpid()}.tmp")  # parallel test processes never see half a file
            tmp.write_text(text)
            tmp.replace(path)
    for entry in (str(source / "src"), str(target)):
        if entry not in sys.path:
            sys.path.insert(0, entry)


_sample_plugin_on_path(BASE_DIR / "examples" / "toolhub-sample-plugin", VAR_DIR / "test-plugins")
# pytest-xdist (`make test` runs the suite in parallel): each worker process gets files of its own. pytest-django
# suffixes the test database per worker; a test that needs a resource shared by every worker (a Redis database it
# flushes) stays in one module, which one worker runs whole (`--dist loadfile`, the Makefile).
_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
_WORKER_DIR = VAR_DIR / "xdist" / _WORKER if _WORKER else VAR_DIR
TOOLHUB_AGENT_SQL_URL = f"sqlite:///{_WORKER_DIR / 'test-agent-demo.sqlite3'}"
TOOLHUB_AUDIT_SPOOL_DIR = _WORKER_DIR / "test-audit-spool"
TOOLHUB_WORKSPACE_ROOT = _WORKER_DIR / "test-workspace"
# With REDIS_URL (CI's second pass) the workers share one Redis database: each caches under a prefix of its own, and
# the cache clear before every test (tests/conftest.py) deletes that prefix's keys only (core.cache), not FLUSHDB,
# which would empty the other workers' cache (identities, gateway sessions) in the middle of their tests.
if _WORKER and REDIS_URL:  # noqa: F405
    CACHES = {"default": {**CACHES["default"], "KEY_PREFIX": f"test-{_WORKER}"}}  # noqa: F405
# A file, not shared-cache memory: threads (health sweeps, parallel tool calls) then wait on the
# busy timeout instead of failing with "database table is locked".
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):  # noqa: F405
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test-db.sqlite3")}  # noqa: F405
TOOLHUB_MCP_WATCH_S = 0.2
# LOCAL servers the tests start run sandboxed like a tenant's: the fixture servers and the real third-party
# servers (var/test-servers) are the runtimes the operator mounts; nothing else of the tree is visible.
TOOLHUB_LOCAL_SANDBOX_RO_PATHS = [*TOOLHUB_LOCAL_SANDBOX_RO_PATHS, str(BASE_DIR / "tests" / "fixtures"),
                                  str(VAR_DIR / "test-servers"), str(BASE_DIR / "toolhub_demo" / "inventory_server.py")]

# Package installs reach the real registries: only the tests of the package store ask for them (at first use, or
# with this setting on). One store for every run, so a package@version installs once on this machine.
TOOLHUB_PACKAGE_INSTALL_ON_SAVE = False
# One store per Python minor version: a PyPI server's venv runs on the interpreter that made it, and the sandbox mounts
# only the running one (CI runs the suite on 3.11, then on 3.13).
TOOLHUB_PACKAGE_STORE = str(VAR_DIR / ("test-packages" if sys.version_info[:2] == (3, 11)
                                       else f"test-packages-py{sys.version_info[0]}.{sys.version_info[1]}"))
