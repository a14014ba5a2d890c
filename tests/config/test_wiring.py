"""Project wiring: OpenAPI schema, docs and the Celery round trip."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from django.conf import settings

from config.celery import ping
from tests.waiting import PROCESS_BOUND_S, scaled


def test_openapi_schema_builds(api: Any) -> None:
    resp = api.get("/api/v1/schema/", HTTP_ACCEPT="application/json")
    assert resp.status_code == 200
    paths = resp.json()["paths"]
    for path in ("/api/v1/tools/", "/api/v1/tools/{id}/", "/api/v1/tools/{id}/status/", "/api/v1/tools/export/",
                 "/api/v1/tools/import/", "/api/v1/tools/all/", "/api/v1/tools/options/"):
        assert path in paths, path


def test_swagger_ui_is_served(api: Any) -> None:
    assert api.get("/api/v1/docs/").status_code == 200


@pytest.mark.celery_worker
@pytest.mark.django_db(transaction=True)
def test_ping_round_trip() -> None:
    """Eager without a broker (pass 1); through Redis and a real worker process in CI (pass 2)."""
    result = ping.delay()
    assert result.get(timeout=scaled(30)) == "pong"
    if settings.TOOLHUB_TEST_CELERY_WORKER:
        assert not settings.CELERY_TASK_ALWAYS_EAGER
        assert result.backend.__class__.__name__ == "RedisBackend"


def test_schema_generates_without_warnings(db: Any, tmp_path: Any) -> None:
    from django.core.management import call_command

    call_command("spectacular", "--fail-on-warn", "--validate", "--file", str(tmp_path / "schema.yaml"))
    assert (tmp_path / "schema.yaml").stat().st_size > 10_000


def test_migrations_match_the_models(db: Any) -> None:
    from django.core.management import call_command

    call_command("makemigrations", "--check", "--dry-run", verbosity=0)  # exits non-zero when a model drifted


# -- production settings refuse unsafe defaults --------------------------------------------------------

PROD_ENV = {
    "DJANGO_SETTINGS_MODULE": "config.settings.production",
    "TOOLHUB_SECRET_KEYS": "x" * 43 + "=",
    "DJANGO_SECRET_KEY": "a-long-random-production-secret-key-for-the-settings-test",
    "ALLOWED_HOSTS": "toolhub.example.com",
}


class Loaded(NamedTuple):
    """What loading the settings under one environment gave: as a process's exit code, stdout and stderr."""

    returncode: int
    stdout: str
    stderr: str


# Every case runs in one fresh interpreter (`_LOADER`), one after another: the settings modules are dropped from
# sys.modules and the environment is replaced before each, so each imports the settings afresh under its own
# environment, exactly as a process start would (settings are read once per process), for ~0.5 s of CPU in all
# rather than ~0.5 s each (a Python with Django and Celery imported). The one case with `apps` (django.setup, the
# URL conf) runs last, on settings nothing in that process had configured before (the loader checks). That each
# case's import is afresh shows in "redis with password", which follows three cases whose base settings read other
# Redis URLs.
_LOADER = """
import contextlib, io, json, os, sys, traceback

import django
from django.conf import Settings, settings as lazy

cases, clean = json.loads(sys.stdin.read()), dict(os.environ)
results = {}
for name, case in sorted(cases.items(), key=lambda item: item[1]["apps"]):
    for module in [m for m in sys.modules if m == "config.settings" or m.startswith("config.settings.")]:
        del sys.modules[module]
    os.environ.clear()
    os.environ.update({**clean, **case["env"]})
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            if case["apps"]:
                assert not lazy.configured, "an earlier case configured the settings"
                django.setup()
                loaded = lazy
            else:
                loaded = Settings(os.environ["DJANGO_SETTINGS_MODULE"])  # what reading one setting does first
            loaded.INSTALLED_APPS
            exec(case["code"], {"settings": loaded})
        results[name] = [0, out.getvalue(), ""]
    except BaseException:
        results[name] = [1, out.getvalue(), traceback.format_exc()]
print(json.dumps(results))
"""


def _load_settings_cases(cases: dict[str, tuple[dict[str, str], str, bool]]) -> dict[str, Loaded]:
    """Import the settings under each case's environment (name: (env, code, apps)), each as if in a fresh process
    (see `_LOADER`); with `apps`, load every app too (django.setup), for a check that needs more than the settings."""
    # CI's second pass exports the PostgreSQL/Redis/broker URLs: each check starts from embedded defaults.
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("DJANGO_", "TOOLHUB_", "ALLOWED_HOSTS", "DATABASE_URL", "REDIS_URL", "CELERY_"))}
    # Reading one setting imports the whole settings module: its refusals (ImproperlyConfigured) are raised there.
    payload = {name: {"env": env, "code": code or "pass", "apps": apps} for name, (env, code, apps) in cases.items()}
    done = subprocess.run(
        [sys.executable, "-c", _LOADER], input=json.dumps(payload), env=clean, capture_output=True, text=True,
        timeout=PROCESS_BOUND_S, cwd=str(Path(__file__).resolve().parents[2]),
    )
    assert done.returncode == 0, done.stderr
    return {name: Loaded(*row) for name, row in json.loads(done.stdout.splitlines()[-1]).items()}


_REDIS_URLS = ("REDIS_URL", "CELERY_BROKER_URL", "CELERY_RESULT_BACKEND")
_CASES: dict[str, tuple[dict[str, str], str, bool]] = {
    **{f"no {missing}": ({k: v for k, v in PROD_ENV.items() if k != missing}, "", False)
       for missing in ("DJANGO_SECRET_KEY", "ALLOWED_HOSTS")},
    "production": (PROD_ENV,
                   "from django.urls import resolve, Resolver404\n"
                   "assert settings.SECRET_KEY.startswith('a-long'); assert not settings.TOOLHUB_DEMO_ENABLED\n"
                   "assert getattr(settings, 'SECURE_HSTS_SECONDS', 0) == 0\n"
                   "try:\n    resolve('/market/demo-catalog.json'); print('SERVED')\n"
                   "except Resolver404:\n    print('HIDDEN')",
                   True),  # the URL conf imports every app's views
    "behind a TLS proxy": ({**PROD_ENV, "TOOLHUB_BEHIND_TLS_PROXY": "1"},
                           "print(settings.SECURE_HSTS_SECONDS, settings.SECURE_SSL_REDIRECT, "
                           "settings.SECURE_PROXY_SSL_HEADER)", False),
    "invalid outbound allow": ({"DJANGO_SETTINGS_MODULE": "config.settings.dev",
                                "TOOLHUB_OUTBOUND_ALLOW": "10.0.0.0/8,internal.example"}, "", False),
    "filesystem broker": ({"DJANGO_SETTINGS_MODULE": "config.settings.dev"},
                          "print(settings.CELERY_BROKER_TRANSPORT_OPTIONS['control_folder'])", False),
    **{f"{name} without password": ({**PROD_ENV, name: "redis://127.0.0.1:6379/3"}, "", False)
       for name in _REDIS_URLS},
    "redis with password": ({**PROD_ENV, **{name: f"redis://:s3cret@127.0.0.1:6379/{n}"
                                            for n, name in enumerate(_REDIS_URLS)}},
                            "print(settings.REDIS_URL.startswith('redis://:s3cret@'))", False),
}


@pytest.fixture(scope="module")
def loaded() -> dict[str, Loaded]:
    return _load_settings_cases(_CASES)


@pytest.mark.parametrize("missing", ["DJANGO_SECRET_KEY", "ALLOWED_HOSTS"])
def test_production_requires_secret_key_and_allowed_hosts(loaded: dict[str, Loaded], missing: str) -> None:
    done = loaded[f"no {missing}"]
    assert done.returncode != 0
    assert "ImproperlyConfigured" in done.stderr and missing in done.stderr


def test_production_loads_with_everything_set_and_hides_the_demo(loaded: dict[str, Loaded]) -> None:
    done = loaded["production"]
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "HIDDEN"


def test_production_behind_a_tls_proxy_sets_hsts_and_the_proxy_header(loaded: dict[str, Loaded]) -> None:
    done = loaded["behind a TLS proxy"]
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "31536000 True ('HTTP_X_FORWARDED_PROTO', 'https')"


def test_an_invalid_outbound_allow_fails_at_startup_naming_the_entry(loaded: dict[str, Loaded]) -> None:
    done = loaded["invalid outbound allow"]
    assert done.returncode != 0
    assert "ImproperlyConfigured" in done.stderr and "'internal.example'" in done.stderr


def test_the_filesystem_broker_keeps_its_control_folder_under_var(loaded: dict[str, Loaded]) -> None:
    done = loaded["filesystem broker"]
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("celery/control") and "/var/" in done.stdout


@pytest.mark.parametrize("name", _REDIS_URLS)
def test_production_refuses_a_redis_without_password(loaded: dict[str, Loaded], name: str) -> None:
    done = loaded[f"{name} without password"]
    assert done.returncode != 0
    assert "ImproperlyConfigured" in done.stderr and f"{name} must carry the Redis password" in done.stderr
    assert "redis://:PASSWORD@127.0.0.1:6379/3" in done.stderr


def test_production_takes_a_redis_with_password(loaded: dict[str, Loaded]) -> None:
    done = loaded["redis with password"]
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"

