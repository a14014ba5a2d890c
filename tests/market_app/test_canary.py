"""A source's auth header value never appears in a response, an admin page, an error or a log line."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from django.test import Client

from market_app.models import MarketSource
from tests.factories import UserFactory
from tests.fixtures.catalog_server import CatalogServer

pytestmark = pytest.mark.django_db

CANARY = "zz-canary-0d5e7b"


def test_auth_header_value_never_leaves(api: Any, tenant: Any, caplog: Any) -> None:
    caplog.set_level(logging.DEBUG)
    seen: list[str] = []
    with CatalogServer() as server:
        server.json("/c.json", [{"name": "alpha", "url": "https://a.example.test/mcp"}],
                    require={"X-Api-Key": "the-right-one"})
        created = api.post("/api/v1/market/sources/", {
            "name": "Cat", "url": server.url("/c.json"), "auth_headers": {"X-Api-Key": CANARY}}, format="json")
        source_id = created.json()["id"]
        base = f"/api/v1/market/sources/{source_id}/"
        seen += [created.content.decode(),
                 api.get("/api/v1/market/sources/").content.decode(),
                 api.get(base).content.decode(),
                 api.patch(base, {"auth_headers": {"X-Api-Key": "********"}}, format="json").content.decode(),
                 api.post(base + "refresh/").content.decode()]  # 401 upstream: an error with a message
        assert server.seen("/c.json")[-1].headers["x-api-key"] == CANARY  # it was sent, though
    root = Client()
    root.force_login(UserFactory(username="root", is_staff=True, is_superuser=True))
    seen += [root.get("/admin/market_app/marketsource/").content.decode(),
             root.get(f"/admin/market_app/marketsource/{source_id}/change/").content.decode()]
    source = MarketSource.objects.get(pk=source_id)
    seen += [source.last_error, str(source.last_counts), caplog.text]
    assert "authentication failed" in seen[4]
    for text in seen:
        assert CANARY not in text
