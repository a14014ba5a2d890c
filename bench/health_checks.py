"""Bench: 200 REMOTE health checks through tools_app.services.health, 10 against hanging servers.

Prints the sweep's total time next to one timeout: bounded concurrency means the hanging servers cost about
one timeout per wave, not one each. Run: `.venv/bin/python bench/health_checks.py`.
"""

from __future__ import annotations

import os
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SCRATCH = Path(tempfile.mkdtemp(prefix="toolhub-bench-"))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
os.environ["DATABASE_URL"] = f"sqlite:///{SCRATCH / 'bench.sqlite3'}"
os.environ.pop("CELERY_BROKER_URL", None)

import logging  # noqa: E402

import django  # noqa: E402

django.setup()
logging.getLogger().setLevel(logging.WARNING)

from django.core.management import call_command  # noqa: E402

from tests.fixtures.mcp_servers import INVENTORY, http_server  # noqa: E402

TOTAL, HANGING, TIMEOUT_S, CONCURRENCY = 200, 10, 2.0, 16


def hanging_server() -> int:
    """Accepts connections and never answers."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(256)
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            conn, _ = sock.accept()
            held.append(conn)

    threading.Thread(target=accept, daemon=True).start()
    return int(sock.getsockname()[1])


def main() -> None:
    call_command("migrate", verbosity=0)
    from tenants_app.models import Tenant
    from tools_app.models import Tool, ToolType
    from tools_app.services.health import check_all_tools
    from tools_app.wiring.pool import pool

    tenant = Tenant.objects.create(slug="bench", name="Bench")
    hang_port = hanging_server()
    with http_server(INVENTORY, extra_args=("--stateless",)) as url_a, http_server(INVENTORY) as url_b:
        rows = []
        for i in range(TOTAL):
            url = f"http://127.0.0.1:{hang_port}/mcp" if i < HANGING else (url_a if i % 2 else url_b)
            rows.append(Tool(tenant=tenant, name=f"remote-{i}", type=ToolType.REMOTE,
                             config={"url": url, "transport": "streamable_http", "headers": {}, "timeout_s": TIMEOUT_S}))
        Tool.objects.bulk_create(rows)
        pool()  # configured once, outside the timing
        started = time.monotonic()
        counts = check_all_tools(concurrency=CONCURRENCY)
        elapsed = time.monotonic() - started
    print(f"checked={counts['checked']} ok={counts['ok']} failed={counts['failed']} concurrency={CONCURRENCY}")
    print(f"sweep total: {elapsed:.2f} s; one timeout: {TIMEOUT_S:.2f} s; ratio {elapsed / TIMEOUT_S:.1f}x")
    print(f"serial worst case would be >= {HANGING * TIMEOUT_S:.0f} s for the hanging ones alone")
    pool().close_all()


if __name__ == "__main__":
    main()
