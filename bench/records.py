"""What Toolhub adds to a write: a 100-record create_record batch through Toolhub vs the same batch with the ORM.

    .venv/bin/python bench/records.py [-n 30] [--size 100]

In one process on a scratch SQLite Toolhub (var/bench-records), side by side and interleaved:
- `toolhub`: tools_app.services.invoke.tool_invoke — the tool checks, strict arguments, permissions, the
  transaction, per-record validation and the audit row (what the invoke API and chat both run);
- `api`: the same through POST /api/v1/tools/{id}/invoke/ (DRF test client, in process: no socket);
- `orm`: `Product.objects.create(...)` per record in one `transaction.atomic()` — what a developer writes;
- `bulk` (for reference): one `bulk_create`.
Goal: toolhub p50 under 2x the orm p50.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable

from _common import pct, scratch_toolhub, summary


def batch(tag: str, size: int) -> list[dict[str, object]]:
    return [{"sku": f"{tag}-{i:03d}", "name": f"Part {i}", "price_cents": 100 + i, "stock": i} for i in range(size)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=30)
    parser.add_argument("--size", type=int, default=100)
    args = parser.parse_args()
    env, token = scratch_toolhub("bench-records")
    os.environ.update({k: v for k, v in env.items() if k.startswith(("TOOLHUB_", "DJANGO_", "DATABASE_", "LOG_"))})
    os.environ["DEBUG"] = "0"  # DEBUG keeps every query in memory: a cost neither side would pay in production
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Permission
    from django.db import transaction
    from rest_framework.test import APIClient

    from tenants_app.models import Tenant
    from toolhub_demo.models import Product
    from tools_app.models import Tool, ToolStatus
    from tools_app.services.invoke import tool_invoke

    tenant = Tenant.objects.get(slug="bench")
    user = get_user_model().objects.get(username="bench")
    user.user_permissions.add(*Permission.objects.filter(content_type__app_label="toolhub_demo"))
    user = get_user_model().objects.get(pk=user.pk)
    tool = Tool.objects.get(tenant=tenant, name="create_record")
    Tool.objects.filter(pk=tool.pk).update(status=ToolStatus.ENABLED)
    client = APIClient(SERVER_NAME="localhost")
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}", HTTP_X_TENANT="bench")
    counter = iter(range(10**9))

    def toolhub() -> None:
        done = tool_invoke(tenant=tenant, actor=user, tool_id=tool.pk, function="create_record",
                           arguments={"model": "product", "records": batch(f"T{next(counter)}", args.size)})
        assert done.result.success, done.result.error

    def api() -> None:
        resp = client.post(f"/api/v1/tools/{tool.pk}/invoke/", {"function": "create_record", "arguments": {
            "model": "product", "records": batch(f"A{next(counter)}", args.size)}}, format="json")
        assert resp.status_code == 200 and resp.json()["success"], resp.content[:300]

    def orm() -> None:
        with transaction.atomic():
            for values in batch(f"O{next(counter)}", args.size):
                Product.objects.create(tenant=tenant, **values)

    def bulk() -> None:
        with transaction.atomic():
            Product.objects.bulk_create([Product(tenant=tenant, **values)
                                         for values in batch(f"B{next(counter)}", args.size)])

    runs: dict[str, Callable[[], None]] = {"toolhub": toolhub, "api": api, "orm": orm, "bulk": bulk}
    samples: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(3):  # warm up: imports, caches, the first statements
        for fn in runs.values():
            fn()
    for _ in range(args.n):  # interleaved, so drift (a growing table, the page cache) hits all alike
        for name, fn in runs.items():
            started = time.perf_counter()
            fn()
            samples[name].append((time.perf_counter() - started) * 1000)
    for name in runs:
        print(f"{name:8} create {args.size} records: {summary(samples[name])}")
    o50 = pct(samples["orm"], 50)
    print(json.dumps({
        "size": args.size, "toolhub_over_orm_p50": round(pct(samples["toolhub"], 50) / o50, 2),
        "api_over_orm_p50": round(pct(samples["api"], 50) / o50, 2),
        "bulk_over_orm_p50": round(pct(samples["bulk"], 50) / o50, 2), "goal_toolhub_over_orm": 2,
    }))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
