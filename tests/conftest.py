"""Shared fixtures: tenants, members with tokens, and API clients bound to a tenant."""

from __future__ import annotations

import fcntl
import gc
import itertools
import json
import os
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from rest_framework.test import APIClient

from tenants_app.models import Role
from tenants_app.services import token_for_user
from tests.browser import browser, module_chromium  # noqa: F401 - fixtures of the browser tests (one Chromium a module)
from tests.cpu_per_module import register as register_cpu_per_module
from tests.factories import MembershipFactory, TenantFactory, ToolFactory, UserFactory
from tests.fixtures.zygote import shutdown as stop_zygote
from tests.migrated import sqlite_copy, template_path
from tests.waiting import scaled


def make_client(user: Any, tenant_slug: str | None) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_for_user(user=user)}")
    if tenant_slug:
        client.defaults["HTTP_X_TENANT"] = tenant_slug
    return client


@pytest.hookimpl(tryfirst=True)  # before pytest-timeout's own pytest_configure reads the option
def pytest_configure(config: pytest.Config) -> None:
    """pytest's per-test timeout (pyproject.toml's `timeout`, a hang guard) times TOOLHUB_TEST_SLOW_FACTOR, as every
    other hang guard of the suite (tests/waiting.py). A `--timeout` or PYTEST_TIMEOUT given by hand is taken as is."""
    register_cpu_per_module(config)  # opt-in: TOOLHUB_TEST_CPU=<folder> (tests/cpu_per_module.py)
    if config.getoption("timeout", None) is None and not os.environ.get("PYTEST_TIMEOUT"):
        base = config.getini("timeout")
        if base:
            config.option.timeout = scaled(float(base))


# --- Slowest modules first -------------------------------------------------------------------------------------
# Under pytest-xdist with `--dist loadfile` a worker takes one module at a time, in collection order (the Makefile
# turns xdist's own reorder by test count off). A slow module taken last keeps one worker busy while the others
# idle, so workers collect the modules slowest first: seconds per module from the last run on this machine
# (var/test-durations.json, written at the end of each parallel run), else from the measured table in
# tests/fixtures/module_durations.json. Only the order of whole modules changes; within a module, tests keep theirs.
_DURATIONS_TABLE = Path(__file__).resolve().parent / "fixtures" / "module_durations.json"


def _durations_file(config: pytest.Config) -> Path:
    return Path(str(config.rootpath)) / "var" / "test-durations.json"


def _module_seconds(config: pytest.Config) -> dict[str, float]:
    seconds: dict[str, float] = {}
    for source in (_DURATIONS_TABLE, _durations_file(config)):
        try:
            seconds.update({str(k): float(v) for k, v in json.loads(source.read_text()).items()})
        except (OSError, ValueError, AttributeError):
            continue
    return seconds


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not hasattr(config, "workerinput"):  # only xdist workers: a run in one process keeps the file order
        return
    seconds = _module_seconds(config)
    tests: dict[str, int] = {}
    for item in items:
        module = item.nodeid.split("::", 1)[0]
        tests[module] = tests.get(module, 0) + 1
    # A module the table does not know yet (new since it was measured) is estimated from its number of tests at the
    # median seconds per test of the known modules, not taken as 0 s: a slow new module sorted last would run alone
    # at the end of the run while the other workers idle.
    per_test = sorted(seconds[m] / n for m, n in tests.items() if m in seconds and n)
    guess = per_test[len(per_test) // 2] if per_test else 1.0
    estimate = {m: seconds.get(m, n * guess) for m, n in tests.items()}
    items.sort(key=lambda item: -estimate[item.nodeid.split("::", 1)[0]])  # stable: same for every worker


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection built (every module of the project and its dependencies, imported by each worker, and the
    test items) lives until the process ends: moved out of the garbage collector's generations (gc.freeze), so each
    full collection during the tests no longer walks it again (they took half the time: ~0.16 -> ~0.08 s each, a
    few dozen of them per worker). Only what is garbage now is collected first; nothing a test makes is frozen."""
    gc.collect()
    gc.freeze()


_run_seconds: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _run_seconds[report.nodeid.split("::", 1)[0]] = _run_seconds.get(report.nodeid.split("::", 1)[0], 0.0) + float(
        report.duration)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    stop_zygote()  # this process's fixture fork server, if a test started one: ended and waited for (its CPU counted)
    config = session.config
    if hasattr(config, "workerinput") or not getattr(config.option, "numprocesses", None) or not _run_seconds:
        return  # the controller of a parallel run records what its workers reported
    target = _durations_file(config)
    try:
        known = json.loads(target.read_text())
    except (OSError, ValueError):
        known = {}
    known = {**(known if isinstance(known, dict) else {}), **{k: round(v, 2) for k, v in _run_seconds.items()}}
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(dict(sorted(known.items())), indent=1) + "\n")
    tmp.replace(target)


@pytest.fixture(scope="session")
def django_db_setup(
    request: pytest.FixtureRequest,
    django_test_environment: None,
    django_db_blocker: Any,
    django_db_use_migrations: bool,
    django_db_keepdb: bool,
    django_db_createdb: bool,
    django_db_modify_db_settings: None,
) -> Iterator[None]:
    """pytest-django's test database setup, with one change on SQLite: the first test process to need it migrates
    its database and leaves a copy (a template, var/xdist/template-<key>.sqlite3, the key a hash of every migration
    file, Django's version and Python's); every other process, of this run or a later one (another xdist worker, the
    next `pytest` of a module), starts from that copy, then runs `migrate` over it (nothing left to apply: ~2 s)
    instead of applying every migration (~25 s of CPU, which every worker of a parallel run also waited for). A new
    or edited migration is a new key, so a new template. The database each test sees is the same."""
    from django.conf import settings
    from django.test.utils import setup_databases, teardown_databases
    from pytest_django.fixtures import _disable_migrations, _get_databases_for_setup

    if not django_db_use_migrations:
        _disable_migrations()
    keepdb = django_db_keepdb and not django_db_createdb
    aliases, serialized_aliases = _get_databases_for_setup(request.session.items)
    default = settings.DATABASES["default"]
    shared = (django_db_use_migrations and not keepdb and aliases <= {"default"}
              and default["ENGINE"].endswith("sqlite3") and bool(default.get("TEST", {}).get("NAME")))
    verbosity = request.config.option.verbose

    def setup(keep: bool) -> Any:
        with django_db_blocker.unblock():
            return setup_databases(verbosity=verbosity, interactive=False, aliases=aliases,  # type: ignore[arg-type]  # stubs say Mapping; Django takes any collection (pytest-django passes this set)
                                   serialized_aliases=serialized_aliases, keepdb=keep)

    with _outside_the_tests_timeout(request):
        db_cfg = _setup_once(setup, keepdb, shared, default, settings)
    _flush_retries_deadlocks()
    _flush_keeps_content_types()
    yield
    if not keepdb:
        with django_db_blocker.unblock():
            try:
                teardown_databases(db_cfg, verbosity=verbosity)
            except Exception as exc:  # noqa: BLE001 - as pytest-django: a failed teardown is a warning
                request.node.warn(pytest.PytestWarning(f"Error when trying to teardown test databases: {exc!r}"))


def _flush_retries_deadlocks() -> None:
    """On PostgreSQL a transactional test ends with one TRUNCATE of every table, which locks them one by one; a
    query still running in a server thread the test started (e.g. the gateway's list-changed sweep, a join) can hold
    one of them and wait for another, and PostgreSQL then cancels one side of the deadlock. When it cancels the flush,
    nothing was emptied (the TRUNCATE is one transaction) and the next test met the last one's rows (CI, pass 2). The
    flush is tried again, a few times, once the other side has gone; any other error is raised as before."""
    from django.db import OperationalError
    from django.db.backends.base.operations import BaseDatabaseOperations

    original = BaseDatabaseOperations.execute_sql_flush
    if getattr(original, "retries_deadlocks", False):
        return

    def execute_sql_flush(self: BaseDatabaseOperations, sql_list: list[str]) -> None:
        for attempt in range(1, 6):
            try:
                return original(self, sql_list)
            except OperationalError as exc:
                if "deadlock detected" not in str(exc) or attempt == 5:
                    raise
                time.sleep(0.1 * attempt)

    execute_sql_flush.retries_deadlocks = True  # type: ignore[attr-defined]
    BaseDatabaseOperations.execute_sql_flush = execute_sql_flush  # type: ignore[method-assign,assignment]


def _flush_keeps_content_types() -> None:
    """A transactional test ends with a flush of every table, then post_migrate, whose create_contenttypes and
    create_permissions read every app's content types and permissions again and insert the ~220 rows the flush had
    deleted, one query at a time: most of the flush's CPU (an empty transactional test took 70 ms of worker CPU on
    SQLite, 11 ms without them). Once the test database is migrated, no test adds a model, so the flush leaves those
    two tables alone and those two receivers are disconnected; the rest of post_migrate still runs after each flush.
    What a test sees is the same rows (with the same ids, where each flush used to hand out new ones); every other
    table is emptied as before, including the ones that point at these two (user and group permissions, admin log,
    object permissions)."""
    from django.contrib.auth.management import create_permissions
    from django.contrib.auth.models import Permission
    from django.contrib.contenttypes.management import create_contenttypes
    from django.contrib.contenttypes.models import ContentType
    from django.core.management.commands import flush as flush_command
    from django.db.models.signals import post_migrate

    flush: Any = flush_command  # its `sql_flush` (imported from django.core.management.sql) is not in the stubs

    if getattr(flush.sql_flush, "keeps_content_types", False):
        return
    kept = {ContentType._meta.db_table, Permission._meta.db_table}

    def sql_flush(style: Any, connection: Any, reset_sequences: bool = True, allow_cascade: bool = False) -> list[str]:
        tables = [t for t in connection.introspection.django_table_names(only_existing=True, include_views=False)
                  if t not in kept]
        return list(connection.ops.sql_flush(style, tables, reset_sequences=reset_sequences,
                                             allow_cascade=allow_cascade))

    sql_flush.keeps_content_types = True  # type: ignore[attr-defined]
    flush.sql_flush = sql_flush
    post_migrate.disconnect(create_contenttypes)
    post_migrate.disconnect(create_permissions, dispatch_uid="django.contrib.auth.management.create_permissions")


@contextmanager
def _outside_the_tests_timeout(request: pytest.FixtureRequest) -> Iterator[None]:
    """The test database is the session's, made during the first test's setup: its time (every migration, or the
    wait for the worker applying them; 100 s on this 2-core machine under load) does not count against that test's
    pytest-timeout, which is then set again, whole, for the test itself."""
    item = getattr(request, "_pyfuncitem", None)
    timer_set = item is not None and getattr(item, "cancel_timeout", None) is not None
    if timer_set:
        request.config.hook.pytest_timeout_cancel_timer(item=item)
    try:
        yield
    finally:
        if timer_set:
            import pytest_timeout

            request.config.hook.pytest_timeout_set_timer(item=item, settings=pytest_timeout._get_item_settings(item))


def _setup_once(setup: Callable[[bool], Any], keepdb: bool, shared: bool, default: Any, settings: Any) -> Any:
    if not shared:
        db_cfg = setup(keepdb)
    else:
        own = Path(default["TEST"]["NAME"])
        template = template_path(settings.VAR_DIR)
        template.parent.mkdir(parents=True, exist_ok=True)
        with open(f"{template}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # the first worker holds it while it migrates; the others wait
            if template.exists():
                sqlite_copy(template, own)
                fcntl.flock(lock, fcntl.LOCK_UN)
                db_cfg = setup(True)  # keep the copy: `migrate` checks it is complete
            else:
                for stale in template.parent.glob("template-*.sqlite3*"):  # older migrations' (a day old or more)
                    if time.time() - stale.stat().st_mtime > 86400:
                        stale.unlink(missing_ok=True)
                db_cfg = setup(False)
                sqlite_copy(own, template)
    return db_cfg


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    """Rolled-back rows reuse ids: nothing cached by one test (identities, throttles) may reach the next."""
    from django.core.cache import cache

    cache.clear()


@pytest.fixture(autouse=True)
def _quota_windows(monkeypatch: Any, settings: Any) -> Iterator[None]:
    """Quota counters start empty for each test (ids are reused after a rollback), and the quota clock is shifted to
    the first second of the current UTC minute, so the calls of one test (a minute at most) never straddle a
    window's end and see a per-minute limit reset halfway."""
    from tools_app.services import quotas

    settings.TOOLHUB_QUOTA_PREFIX = f"{settings.TOOLHUB_QUOTA_PREFIX}{uuid.uuid4().hex[:8]}:"
    quotas._store.reset()
    started = time.time()
    shift = started % 60 - 1
    monkeypatch.setattr(quotas, "clock", lambda: time.time() - shift)
    yield
    quotas._store.reset()


@pytest.fixture(scope="session")
def _workspaces(tmp_path_factory: Any) -> Iterator[Path]:
    yield tmp_path_factory.mktemp("workspaces")


_workspace_numbers = itertools.count()


@pytest.fixture(autouse=True)
def _isolated_workspace(settings: Any, _workspaces: Path) -> None:
    """Each test gets its own workspace root (new and empty), so files never leak between tests. A numbered folder
    of one per-process folder, not `tmp_path_factory.mktemp` (which lists every earlier test's folder to number
    the next one and resolves the path each time, for each of the process's tests)."""
    root = _workspaces / f"workspace{next(_workspace_numbers)}"
    root.mkdir()
    settings.TOOLHUB_WORKSPACE_ROOT = root


@pytest.fixture(scope="session")
def llm_hub() -> Iterator[Any]:
    """One fake-LLM HTTP server per test process; `start_llm` fixtures give each test its own FakeLLM on it (a path
    prefix of its own: its script, key and requests, unreachable once the test ends)."""
    from tests.fixtures.fake_llm import LLMHub

    with LLMHub() as hub:
        yield hub


@pytest.fixture
def fresh_process_state() -> Any:
    """This process's own state (core.process_state: HTTP clients, executors) made anew for the test and after."""
    from core.process_state import reset_all

    reset_all()
    yield
    reset_all()


@pytest.fixture(scope="session")
def sql_demo_db() -> Any:
    from toolhub_demo.tools import ensure_sql_demo_database

    return ensure_sql_demo_database()


@pytest.fixture
def tenant(db: Any) -> Any:
    return TenantFactory(slug="acme")


@pytest.fixture
def other_tenant(db: Any) -> Any:
    return TenantFactory(slug="globex")


@pytest.fixture
def member_client(db: Any) -> Callable[..., APIClient]:
    """member_client(tenant, role) -> APIClient for a new user with that role."""

    def build(tenant: Any, role: str = Role.ADMIN, *, header: bool = True, user: Any = None) -> APIClient:
        user = user or UserFactory()
        MembershipFactory(tenant=tenant, user=user, role=role)
        client = make_client(user, tenant.slug if header else None)
        client.user = user  # type: ignore[attr-defined]
        return client

    return build


@pytest.fixture
def api(tenant: Any, member_client: Callable[..., APIClient]) -> APIClient:
    """An admin of tenant `acme`."""
    return member_client(tenant, Role.ADMIN)


@pytest.fixture
def staff(tenant: Any) -> Any:
    """A signed-in browser (Django's test Client) of a staff user who is an admin of tenant `acme`: the admin site."""
    from django.test import Client

    user = UserFactory(username="staff-admin", is_staff=True)
    MembershipFactory(tenant=tenant, user=user, role=Role.ADMIN)
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def other_api(other_tenant: Any, member_client: Callable[..., APIClient]) -> APIClient:
    """An admin of tenant `globex`."""
    return member_client(other_tenant, Role.ADMIN)


@pytest.fixture
def tool_factory(db: Any) -> type[ToolFactory]:
    return ToolFactory
