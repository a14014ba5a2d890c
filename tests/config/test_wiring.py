"""Project wiring: OpenAPI schema, docs and the Celery round trip."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

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


def _load_settings(env: dict[str, str], code: str = "", *, apps: bool = False) -> subprocess.CompletedProcess[str]:
    """Import the settings in a fresh interpreter (settings are read once per process); with `apps`, load every app
    too (django.setup: ~4 s of CPU, five times the settings alone), for a check that needs more than the settings."""
    # CI's second pass exports the PostgreSQL/Redis/broker URLs: each check starts from embedded defaults.
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("DJANGO_", "TOOLHUB_", "ALLOWED_HOSTS", "DATABASE_URL", "REDIS_URL", "CELERY_"))}
    # Reading one setting imports the whole settings module: its refusals (ImproperlyConfigured) are raised there.
    load = "import django; django.setup(); " if apps else ""
    script = load + "from django.conf import settings; settings.INSTALLED_APPS; " + (code or "pass")
    return subprocess.run(
        [sys.executable, "-c", script], env={**clean, **env}, capture_output=True, text=True, timeout=PROCESS_BOUND_S,
        cwd=str(Path(__file__).resolve().parents[2]),
    )


@pytest.mark.parametrize("missing", ["DJANGO_SECRET_KEY", "ALLOWED_HOSTS"])
def test_production_requires_secret_key_and_allowed_hosts(missing: str) -> None:
    env = {k: v for k, v in PROD_ENV.items() if k != missing}
    done = _load_settings(env)
    assert done.returncode != 0
    assert "ImproperlyConfigured" in done.stderr and missing in done.stderr


def test_production_loads_with_everything_set_and_hides_the_demo() -> None:
    done = _load_settings(
        PROD_ENV,
        "from django.urls import resolve, Resolver404\n"
        "assert settings.SECRET_KEY.startswith('a-long'); assert not settings.TOOLHUB_DEMO_ENABLED\n"
        "assert getattr(settings, 'SECURE_HSTS_SECONDS', 0) == 0\n"
        "try:\n    resolve('/market/demo-catalog.json'); print('SERVED')\nexcept Resolver404:\n    print('HIDDEN')",
        apps=True,  # the URL conf imports every app's views
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "HIDDEN"


def test_production_behind_a_tls_proxy_sets_hsts_and_the_proxy_header() -> None:
    done = _load_settings(
        {**PROD_ENV, "TOOLHUB_BEHIND_TLS_PROXY": "1"},
        "print(settings.SECURE_HSTS_SECONDS, settings.SECURE_SSL_REDIRECT, settings.SECURE_PROXY_SSL_HEADER)",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "31536000 True ('HTTP_X_FORWARDED_PROTO', 'https')"


def test_an_invalid_outbound_allow_fails_at_startup_naming_the_entry() -> None:
    done = _load_settings(
        {"DJANGO_SETTINGS_MODULE": "config.settings.dev", "TOOLHUB_OUTBOUND_ALLOW": "10.0.0.0/8,internal.example"}
    )
    assert done.returncode != 0
    assert "ImproperlyConfigured" in done.stderr and "'internal.example'" in done.stderr


def test_the_filesystem_broker_keeps_its_control_folder_under_var() -> None:
    done = _load_settings(
        {"DJANGO_SETTINGS_MODULE": "config.settings.dev"},
        "print(settings.CELERY_BROKER_TRANSPORT_OPTIONS['control_folder'])",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("celery/control") and "/var/" in done.stdout


@pytest.mark.parametrize("name", ["REDIS_URL", "CELERY_BROKER_URL", "CELERY_RESULT_BACKEND"])
def test_production_refuses_a_redis_without_password(name: str) -> None:
    done = _load_settings({**PROD_ENV, name: "redis://127.0.0.1:6379/3"})
    assert done.returncode != 0
    assert "ImproperlyConfigured" in done.stderr and f"{name} must carry the Redis password" in done.stderr
    assert "redis://:PASSWORD@127.0.0.1:6379/3" in done.stderr


def test_production_takes_a_redis_with_password() -> None:
    urls = {name: f"redis://:s3cret@127.0.0.1:6379/{n}"
            for n, name in enumerate(("REDIS_URL", "CELERY_BROKER_URL", "CELERY_RESULT_BACKEND"))}
    done = _load_settings({**PROD_ENV, **urls}, "print(settings.REDIS_URL.startswith('redis://:s3cret@'))")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"
