"""Demo market: a tenant source "Demo catalog" served by the app itself, filled from the local file at seed time."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from market_app.catalog import DEMO_CATALOG_PATH, FetchResult, parse_document
from market_app.models import CatalogFormat, MarketSource
from tenants_app.models import Tenant

DEMO_SOURCE_NAME = "Demo catalog"
DEMO_PATH = "/market/demo-catalog.json"
PLACEHOLDER_MODULE = "__INVENTORY_DEMO_MODULE__"
REPO = Path(__file__).resolve().parents[1]
INVENTORY_SERVER = REPO / "toolhub_demo" / "inventory_server.py"


def demo_url() -> str:
    """Where the running web server serves the demo catalog (dev settings allow loopback)."""
    return f"http://127.0.0.1:{os.environ.get('PORT', '8000')}{DEMO_PATH}"


def demo_document() -> dict[str, Any]:
    """demo_catalog.json with the inventory entry pointing at a runnable stdio server on this machine."""
    doc: dict[str, Any] = json.loads(DEMO_CATALOG_PATH.read_text())
    server = INVENTORY_SERVER
    for item in doc.get("data", []):
        if PLACEHOLDER_MODULE in item.get("args", []):
            item["command"] = sys.executable
            item["args"] = [str(server)]
    return doc


def seed_market(tenant: Tenant, user: Any) -> list[str]:
    """Create the demo source once and fill it from the local file (the web server is not up yet)."""
    from market_app import services

    source = MarketSource.objects.filter(tenant=tenant, name=DEMO_SOURCE_NAME).first()
    if source is None:
        source = services.source_create(tenant=tenant, actor=user, data=services.SourceInput(
            name=DEMO_SOURCE_NAME, url=demo_url(), format=CatalogFormat.LIST, refresh_interval_min=60,
        ))
    elif source.url != demo_url():
        # `PORT` changed since the last run: follow the web server.
        source = services.source_update(tenant=tenant, actor=user, source_id=source.pk,
                                        changes=services.SourceInput(url=demo_url()))
    if source.last_refresh_at is None:
        parsed = parse_document(demo_document(), CatalogFormat.LIST)
        services.source_apply_catalog(source_id=source.pk, fetched=FetchResult(
            parsed.entries, parsed.errors, full=True, format=parsed.format, pages=1))
    count = source.entries.exclude(status="removed").count()
    return [f"  Market: source '{DEMO_SOURCE_NAME}' with {count} entries (refreshes from {source.url})"]
