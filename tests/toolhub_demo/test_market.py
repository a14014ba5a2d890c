"""Demo market: the served demo catalog and the seeder that fills the demo source without a web server."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from market_app.models import MarketEntry, MarketSource
from tests.factories import UserFactory
from toolhub_demo.market import DEMO_SOURCE_NAME, INVENTORY_SERVER, demo_url, seed_market
from toolhub_demo.seed import demo_seeders

pytestmark = pytest.mark.django_db


def test_demo_catalog_is_served_without_auth(client: Any) -> None:
    resp = client.get("/market/demo-catalog.json")
    assert resp.status_code == 200
    inventory = next(i for i in resp.json()["data"] if i["name"] == "inventory-demo")
    assert inventory["command"] == sys.executable
    assert inventory["args"] == [str(INVENTORY_SERVER)]


def test_seeder_is_registered_and_fills_the_source_once(tenant: Any, monkeypatch: Any) -> None:
    assert seed_market in demo_seeders()
    monkeypatch.setenv("PORT", "8123")
    admin = UserFactory(username="demo-admin", is_superuser=True)
    lines = seed_market(tenant, admin)
    source = MarketSource.objects.get(tenant=tenant, name=DEMO_SOURCE_NAME)
    assert source.url == demo_url() == "http://127.0.0.1:8123/market/demo-catalog.json"
    assert source.last_status == "ok" and source.last_counts["added"] == 4
    assert "4 entries" in lines[0]
    inventory = MarketEntry.objects.get(source=source, name="inventory-demo")
    assert inventory.install["args"] == [str(INVENTORY_SERVER)] and not inventory.is_shell_command
    seed_market(tenant, admin)
    assert MarketSource.objects.filter(name=DEMO_SOURCE_NAME).count() == 1
    assert MarketEntry.objects.filter(source=source).count() == 4


def test_demo_inventory_entry_loads_into_a_working_tool(api: Any, tenant: Any) -> None:
    seed_market(tenant, UserFactory(username="demo-admin", is_superuser=True))
    entry = MarketEntry.objects.get(source__tenant=tenant, name="inventory-demo")
    loaded = api.post(f"/api/v1/market/entries/{entry.pk}/load/", {}, format="json")
    assert loaded.status_code == 201, loaded.content
    tool = loaded.json()["tool"]
    assert tool["name"] == "inventory-demo" and tool["status"] == "ENABLED"
    probe = api.post(f"/api/v1/tools/{tool['id']}/test/").json()
    assert probe["ok"] is True, probe
    assert "get_inventory" in [f["name"] for f in probe["functions"]]
