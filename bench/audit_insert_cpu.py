"""The audit row's write, side by side in one process, in thread CPU per row (time.thread_time), alternated so the
machine's load falls on both alike:

- `orm`: `ToolCall.save(force_insert=True)` (Django's compiler builds the 25-column INSERT for every row);
- `insert`: `tools_app.services.audit.insert` (the statement built once per process, values prepared by the fields);
- `audit()`: the whole `tools_app.services.audit.audit` (redaction, the outcome's excerpts, the screen markers and
  the write) with each of the two writes.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/<your db> .venv/bin/python bench/audit_insert_cpu.py [N] [ROUNDS]

The database must be migrated (`manage.py migrate`); the rows it writes are its own tenant's and deleted at the end.
Without DATABASE_URL it runs on the dev settings' SQLite file.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.dev")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.db import connection  # noqa: E402

settings.DEBUG = False  # as in production: no query log (the dev settings' debug cursor would be counted)

from tenants_app.models import Tenant  # noqa: E402
from tools_app.models import CallStatus, Tool, ToolCall  # noqa: E402
from tools_app.runtime.result import ToolResult  # noqa: E402
from tools_app.services import audit as audit_service  # noqa: E402

N = int(sys.argv[1]) if len(sys.argv) > 1 else 500
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 6
RESULT = ToolResult.ok(text='{"sku": "DEMO-001", "stock": 42, "warehouse": "north"}',
                       content=[{"type": "text", "text": '{"sku": "DEMO-001", "stock": 42}'}])


def per_row_us(work: Callable[[], object]) -> float:
    start = time.thread_time()
    for _ in range(N):
        work()
    return (time.thread_time() - start) / N * 1e6


def main() -> None:
    tenant, _ = Tenant.objects.get_or_create(slug="bench-audit-insert", defaults={"name": "bench audit insert"})
    tool, _ = Tool.objects.get_or_create(tenant=tenant, name="inventory", defaults={"type": "local"})
    original = audit_service.insert

    def row() -> ToolCall:
        return ToolCall(tenant=tenant, tool=tool, tool_name=tool.name, function="get_inventory", via="invoke",
                        title="inventory", arguments={"sku": "DEMO-001"}, status=CallStatus.OK, cost_ms=3,
                        result_excerpt=RESULT.text, result_size=len(RESULT.text), result_content=RESULT.content)

    def audited() -> None:
        audit_service.audit(tenant=tenant, actor=None, tool=tool, function="get_inventory",
                            arguments={"sku": "DEMO-001"}, result=RESULT, status=CallStatus.OK, secrets=["s3cret"],
                            via="invoke")

    def orm_write(call: ToolCall) -> None:
        call.save(force_insert=True)

    def with_orm() -> None:
        audit_service.insert = orm_write
        try:
            audited()
        finally:
            audit_service.insert = original

    pairs: dict[str, tuple[Callable[[], object], Callable[[], object]]] = {
        "row write": (lambda: row().save(force_insert=True), lambda: original(row())),
        "audit()": (with_orm, audited),
    }
    for before, after in pairs.values():  # warm both sides (the statement, the connection)
        before(), after()
    if os.environ.get("AUDIT_INSERT_PROFILE"):  # a thread-CPU cProfile of the fast write, to this file
        import cProfile

        profile = cProfile.Profile(time.thread_time)
        profile.runcall(lambda: [original(row()) for _ in range(N)])
        profile.dump_stats(os.environ["AUDIT_INSERT_PROFILE"])
    print(f"{connection.vendor}; load average {os.getloadavg()[0]:.1f}; thread CPU us per row, "
          f"{N} rows x {ROUNDS} rounds, alternated")
    for name, (orm, fast) in pairs.items():
        was: list[float] = []
        now: list[float] = []
        for turn in range(ROUNDS):
            first, second = (orm, fast) if turn % 2 == 0 else (fast, orm)
            one, two = per_row_us(first), per_row_us(second)
            was.append(one if first is orm else two)
            now.append(two if first is orm else one)
        ratio = statistics.median(now) / statistics.median(was)
        print(f"{name:<10} orm {statistics.median(was):7.1f} ({min(was):.1f}-{max(was):.1f})   "
              f"insert {statistics.median(now):7.1f} ({min(now):.1f}-{max(now):.1f})   insert/orm {ratio:.2f}")
    ToolCall.objects.filter(tenant=tenant).delete()
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
