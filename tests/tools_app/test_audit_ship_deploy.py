"""The audit shipper as the deploy recipes run it: one process in every recipe, idle (not failing) under
`--if-set` while TOOLHUB_AUDIT_STREAM is unset, and refusing to start without it otherwise."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.waiting import PROCESS_BOUND_S, wait_until

REPO = Path(__file__).resolve().parents[2]


def _ship(*args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.test", "TOOLHUB_AUDIT_STREAM": ""}
    return subprocess.Popen([sys.executable, "manage.py", "toolhub_audit_ship", *args], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_every_deploy_recipe_runs_one_audit_shipper() -> None:
    deploy = REPO / "deploy"
    assert "\naudit: python manage.py toolhub_audit_ship --if-set\n" in (deploy / "Procfile").read_text()
    assert "manage.py toolhub_audit_ship --if-set" in (deploy / "compose.yaml").read_text()
    unit = (deploy / "systemd" / "toolhub-audit-ship.service").read_text()
    assert "ExecStart=/opt/toolhub/.venv/bin/python manage.py toolhub_audit_ship\n" in unit
    assert "EnvironmentFile=/etc/toolhub/toolhub.env" in unit


def test_without_a_target_the_shipper_waits_under_if_set_and_fails_otherwise() -> None:
    idle = _ship("--if-set")
    assert idle.stdout is not None
    first = idle.stdout.readline()  # blocks until the command has started and said so
    assert "TOOLHUB_AUDIT_STREAM is not set" in first
    assert idle.poll() is None  # still running: a Procfile runner does not stop the others
    idle.send_signal(signal.SIGTERM)
    assert wait_until(lambda: idle.poll() is not None) and idle.returncode == 0
    refused = _ship()
    out, _ = refused.communicate(timeout=PROCESS_BOUND_S)
    assert refused.returncode != 0 and "TOOLHUB_AUDIT_STREAM is not set" in out
