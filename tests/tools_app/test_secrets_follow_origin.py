"""Secrets follow their origin: a destination moved to another origin does not take its stored secrets along.

One rule (core.secrets.require_secrets_on_move) for REMOTE and HTTP tool URLs, chat model base URLs,
market source URLs and market updates: "********" or omission keeps a secret only on the same origin.
"""

from __future__ import annotations

from typing import Any

import pytest

from agents_app.models import ChatModel
from market_app.catalog import FetchResult, parse_document
from market_app.models import MarketEntry, MarketSource
from market_app.services import source_apply_catalog
from tools_app.models import Tool

pytestmark = pytest.mark.django_db

MASK = "********"
TOKEN = "tok-origin-canary-5521"


def assert_refused(resp: Any, *keys: str) -> None:
    assert resp.status_code == 400, resp.content
    error = resp.json()["error"]
    assert error["code"] == "secrets_required"
    assert error["details"]["secrets_required"] == sorted(keys)
    assert TOKEN.encode() not in resp.content


def make_tool(api: Any, tool_type: str, config: dict[str, Any]) -> Tool:
    resp = api.post("/api/v1/tools/", {"name": "t", "type": tool_type, "config": config}, format="json")
    assert resp.status_code == 201, resp.content
    return Tool.objects.get(pk=resp.json()["id"])


REMOTE = {"url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": f"Bearer {TOKEN}"}}


@pytest.mark.parametrize("moved", ["http://127.0.0.2:9/mcp", "https://127.0.0.1:9/mcp", "http://127.0.0.1:10/mcp",
                                   "http://localhost:9/mcp"])
def test_remote_url_moved_with_masked_header_is_refused_and_nothing_written(api: Any, moved: str) -> None:
    tool = make_tool(api, "REMOTE", REMOTE)
    resp = api.patch(f"/api/v1/tools/{tool.pk}/", {"config": {"url": moved, "headers": {"Authorization": MASK}}},
                     format="json")
    assert_refused(resp, "config.headers.Authorization")
    tool.refresh_from_db()
    assert tool.config["url"] == REMOTE["url"] and tool.config_version == 1


def test_remote_same_origin_keeps_masked_header_and_a_move_with_the_secret_again_is_fine(api: Any) -> None:
    tool = make_tool(api, "REMOTE", REMOTE)
    same = api.patch(f"/api/v1/tools/{tool.pk}/",
                     {"config": {"url": "http://127.0.0.1:9/other", "headers": {"Authorization": MASK}}}, format="json")
    assert same.status_code == 200, same.content
    tool.refresh_from_db()
    assert tool.config["headers"] == REMOTE["headers"]
    moved = api.patch(f"/api/v1/tools/{tool.pk}/",
                      {"config": {"url": "http://127.0.0.2:9/mcp", "headers": {"Authorization": "Bearer new"}}},
                      format="json")
    assert moved.status_code == 200, moved.content
    tool.refresh_from_db()
    assert tool.config["headers"] == {"Authorization": "Bearer new"}


def test_http_tool_url_moved_names_every_kept_secret(api: Any) -> None:
    tool = make_tool(api, "HTTP", {"method": "GET", "url": "http://127.0.0.1:9/x?k=${secret.k}",
                                   "headers": {"X-Key": TOKEN}, "secrets": {"k": TOKEN}})
    resp = api.patch(f"/api/v1/tools/{tool.pk}/", {"config": {
        "method": "GET", "url": "http://127.0.0.3:9/x?k=${secret.k}", "headers": {"X-Key": MASK},
        "secrets": {"k": MASK}}}, format="json")
    assert_refused(resp, "config.headers.X-Key", "config.secrets.k")
    tool.refresh_from_db()
    assert tool.config["url"].startswith("http://127.0.0.1:9/")


def model_id(api: Any) -> int:
    resp = api.post("/api/v1/models/", {"name": "m", "base_url": "http://127.0.0.1:9/v1", "model": "x",
                                        "api_key": TOKEN}, format="json")
    assert resp.status_code == 201, resp.content
    return int(resp.json()["id"])


@pytest.mark.parametrize("key", [None, MASK])
def test_model_base_url_moved_while_keeping_the_key_is_refused(api: Any, key: str | None) -> None:
    pk = model_id(api)
    body = {"base_url": "http://127.0.0.4:9/v1", **({"api_key": key} if key else {})}
    assert_refused(api.patch(f"/api/v1/models/{pk}/", body, format="json"), "api_key")
    assert ChatModel.objects.get(pk=pk).base_url == "http://127.0.0.1:9/v1"


def test_model_base_url_same_origin_or_new_key_is_fine(api: Any) -> None:
    pk = model_id(api)
    assert api.patch(f"/api/v1/models/{pk}/", {"base_url": "http://127.0.0.1:9/v2"}, format="json").status_code == 200
    resp = api.patch(f"/api/v1/models/{pk}/", {"base_url": "http://127.0.0.4:9/v1", "api_key": "new-key-1"},
                     format="json")
    assert resp.status_code == 200, resp.content
    model = ChatModel.objects.get(pk=pk)
    assert (model.base_url, model.api_key) == ("http://127.0.0.4:9/v1", "new-key-1")


def source_id(api: Any, **extra: Any) -> int:
    resp = api.post("/api/v1/market/sources/", {"name": "s", "url": "http://127.0.0.1:9/c.json", **extra},
                    format="json")
    assert resp.status_code == 201, resp.content
    return int(resp.json()["id"])


@pytest.mark.parametrize("headers", [None, {"Authorization": MASK}])
def test_market_source_url_moved_while_keeping_auth_headers_is_refused(api: Any, headers: Any) -> None:
    pk = source_id(api, auth_headers={"Authorization": f"Bearer {TOKEN}"})
    body = {"url": "http://127.0.0.5:9/c.json", **({"auth_headers": headers} if headers else {})}
    assert_refused(api.patch(f"/api/v1/market/sources/{pk}/", body, format="json"), "auth_headers.Authorization")
    assert MarketSource.objects.get(pk=pk).url == "http://127.0.0.1:9/c.json"


def test_market_source_move_without_secrets_or_with_new_ones_is_fine(api: Any) -> None:
    bare = source_id(api)
    assert api.patch(f"/api/v1/market/sources/{bare}/", {"url": "http://127.0.0.5:9/c.json"},
                     format="json").status_code == 200
    pk = source_id(api, auth_headers={"Authorization": "Bearer a"})
    resp = api.patch(f"/api/v1/market/sources/{pk}/", {"url": "http://127.0.0.5:9/c.json",
                                                      "auth_headers": {"Authorization": "Bearer b"}}, format="json")
    assert resp.status_code == 200, resp.content


def test_market_update_moving_the_server_asks_for_the_headers_again(api: Any, tenant: Any) -> None:
    source = MarketSource.objects.create(tenant=tenant, name="Cat", url="http://127.0.0.1:9/c.json")
    item = {"name": "kb", "url": "https://kb.example.test/mcp", "headers": {"X-Api-Key": "", "X-Team": "blue"}}

    def publish(entry: dict[str, Any]) -> None:
        parsed = parse_document({"data": [entry]}, "list")
        source_apply_catalog(source_id=source.pk, fetched=FetchResult(parsed.entries, parsed.errors, full=True,
                                                                      format=parsed.format))

    publish(item)
    entry = MarketEntry.objects.get(source=source, name="kb")
    loaded = api.post(f"/api/v1/market/entries/{entry.pk}/load/", {"headers": {"X-Api-Key": TOKEN}}, format="json")
    assert loaded.status_code == 201, loaded.content
    tool_id = loaded.json()["tool"]["id"]
    publish({**item, "url": "https://evil.example.test/mcp"})
    resp = api.post(f"/api/v1/tools/{tool_id}/market-update/", {}, format="json")
    assert_refused(resp, "headers.X-Api-Key")
    assert Tool.objects.get(pk=tool_id).config["url"] == "https://kb.example.test/mcp"
    again = api.post(f"/api/v1/tools/{tool_id}/market-update/", {"headers": {"X-Api-Key": "fresh"}}, format="json")
    assert again.status_code == 200, again.content
    assert Tool.objects.get(pk=tool_id).config["headers"]["X-Api-Key"] == "fresh"
