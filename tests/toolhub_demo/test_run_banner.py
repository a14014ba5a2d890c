"""`make run` (manage.py toolhub_run): the login is the last thing printed, after the worker's banner, and a
SIGTERM stops the server and every child it started."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from tests.migrated import sqlite_copy, template_path
from tests.waiting import scaled
from tools_app.runtime.procenv import group_running, kill_process_group

pytestmark: list[Any] = [pytest.mark.timeout(scaled(180))]


def test_login_is_printed_after_the_worker_and_the_server_started(tmp_path: Path, django_db_setup: None) -> None:
    # The suite's migrated template (tests/migrated.py, made by `django_db_setup` on SQLite) as the fresh checkout's
    # database: `toolhub_run` still runs `migrate` (nothing left to apply) and seeds the demo, without the ~25 s of
    # CPU of every migration again, which the test database's setup already proved apply on an empty file.
    template = template_path(settings.VAR_DIR)
    if template.exists():
        sqlite_copy(template, tmp_path / "toolhub.sqlite3")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**os.environ, "TOOLHUB_VAR_DIR": str(tmp_path), "DJANGO_SETTINGS_MODULE": "config.settings.dev",
           "TOOLHUB_ADMIN_PASSWORD": "banner-test-pw", "PYTHONUNBUFFERED": "1"}
    # Embedded defaults, as `make run` has them: not the broker of CI's PostgreSQL pass, whose worker this one's
    # would otherwise compete with if it outlived the test.
    for name in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "CELERY_RESULT_BACKEND"):
        env.pop(name, None)
    proc = subprocess.Popen([sys.executable, "manage.py", "toolhub_run", "--port", str(port)],
                            cwd=str(settings.BASE_DIR), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    lines: list[str] = []
    try:
        deadline = time.monotonic() + 120
        assert proc.stdout is not None
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line.rstrip("\n"))
            if "API token:" in line:
                break
    finally:
        stopping = time.monotonic()
        kill_process_group(proc.pid, term_wait_s=60)  # SIGTERM; toolhub_run stops its own children, then exits
        proc.wait(timeout=10)
        stopped_in = time.monotonic() - stopping
    text = "\n".join(lines)
    assert "API token:" in text, text[-3000:]
    login = next(i for i, line in enumerate(lines) if "login admin / banner-test-pw" in line)
    worker = next(i for i, line in enumerate(lines) if "[queues]" in line)
    server = next(i for i, line in enumerate(lines) if "Uvicorn running on" in line)
    assert worker < login and server < login
    assert lines.index(next(line for line in lines if "API token:" in line)) == len(lines) - 1
    # It exited on the SIGTERM (not the SIGKILL after 60 s), and took its worker (a session of its own, which
    # the signal to toolhub_run's group does not reach) down with it.
    assert proc.returncode == 0, (proc.returncode, stopped_in)
    worker_pid = int(re.search(r"embedded Celery worker \+ beat \(pid (\d+)", text).group(1))  # type: ignore[union-attr]
    assert not group_running(worker_pid)



def test_the_demo_model_keeps_its_port_across_restarts(tmp_path: Path) -> None:
    import socket

    from toolhub_demo.management.commands.toolhub_run import demo_model_port

    remembered = tmp_path / "demo-model.port"
    with socket.socket() as probe:  # a default port that is free here (8765 may be taken on a busy machine)
        probe.bind(("127.0.0.1", 0))
        default = int(probe.getsockname()[1])
    first = demo_model_port(remembered, default=default)
    assert first == default and remembered.read_text().strip() == str(first)
    assert demo_model_port(remembered) == first  # a restart: the same URL, so a ChatModel pointed at it still works
    with socket.socket() as busy:  # taken meanwhile (say, a demo model left over): another port for this run only
        busy.bind(("127.0.0.1", first))
        busy.listen()
        other = demo_model_port(remembered)
    assert other != first and remembered.read_text().strip() == str(first)
    assert demo_model_port(remembered) == first  # freed: the next start is back on the remembered port
    remembered.write_text("not a port\n")
    assert demo_model_port(remembered, default=default) == default
