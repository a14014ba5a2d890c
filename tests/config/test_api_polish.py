"""API polish: the root redirects to the admin, unknown API paths answer the JSON envelope,
`GET /api/v1/` lists the entry points, the docs are served locally, and common mistakes get clear errors."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def test_root_redirects_to_the_admin() -> None:
    resp = Client().get("/")
    assert resp.status_code == 302 and resp["Location"] == "/admin/"


@pytest.mark.parametrize("method", ["get", "post", "delete"])
def test_unknown_api_path_is_the_json_envelope(api: Any, method: str) -> None:
    resp = getattr(api, method)("/api/v1/no-such-thing/deeper/")
    assert resp.status_code == 404
    assert resp["Content-Type"].startswith("application/json")
    body = resp.json()
    assert body["error"]["code"] == "not_found" and body["error"]["details"] == {}
    assert "/api/v1/no-such-thing/deeper/" in body["error"]["message"]


def test_unknown_api_path_needs_no_login() -> None:
    resp = Client().get("/api/v1/nope")
    assert resp.status_code == 404 and resp.json()["error"]["code"] == "not_found"


@pytest.mark.parametrize("path", ["/api/v1/nope", "/api/v1/no-such-thing/", "/api/v1/tools/1/nope/", "/api/nope",
                                  "/api"])
def test_unknown_api_path_is_the_envelope_under_debug_too(api: Any, settings: Any, path: str) -> None:
    # `make run` serves with DEBUG on: an API client still gets JSON, not the debug page listing every URL.
    settings.DEBUG = True
    resp = api.get(path)
    assert resp.status_code == 404 and resp["Content-Type"].startswith("application/json")
    assert resp.json()["error"]["code"] == "not_found" and len(resp.content) < 300
    assert b"admin/" not in resp.content
    assert api.get("/api/v1/tools").status_code == 301  # the slash redirect is kept
    page = Client().get("/no-such-page/")  # HTML paths keep Django's debug page under DEBUG
    assert page.status_code == 404 and page["Content-Type"].startswith("text/html")


def test_make_run_serves_the_envelope_for_an_unknown_api_path(settings: Any) -> None:
    # `make run` is uvicorn on config.asgi with DEBUG on: the same answer through the ASGI handler it serves.
    import asyncio

    from core.asgi import OneHopASGIHandler
    from tests.core.test_asgi import call

    settings.DEBUG = True
    status, headers, body = asyncio.run(call(OneHopASGIHandler(), "/api/v1/nope"))
    assert status == 404 and headers["content-type"].startswith("application/json")
    assert json.loads(body)["error"]["code"] == "not_found" and b"URLconf" not in body
    status, headers, body = asyncio.run(call(OneHopASGIHandler(), "/no-such-page/"))
    assert status == 404 and headers["content-type"].startswith("text/html") and b"URLconf" in body


def test_missing_trailing_slash_still_redirects(api: Any) -> None:
    resp = api.get("/api/v1/tools")
    assert resp.status_code == 301 and resp["Location"] == "/api/v1/tools/"


def test_unknown_non_api_path_keeps_the_html_404() -> None:
    resp = Client().get("/no-such-page/")
    assert resp.status_code == 404 and not resp["Content-Type"].startswith("application/json")


def test_known_routes_still_answer(api: Any) -> None:
    assert api.get("/api/v1/tools/").status_code == 200
    missing = api.get("/api/v1/tools/999999/")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"


def test_api_root_lists_the_entry_points() -> None:
    resp = Client().get("/api/v1/")
    assert resp.status_code == 200
    body = resp.json()
    for name in ("tools", "approvals", "agents", "conversations", "market_sources", "market_entries"):
        assert body["endpoints"][name].startswith("http://testserver/api/v1/"), name
    assert body["endpoints"]["tools"].endswith("/api/v1/tools/")
    assert set(body["docs"]) == {"schema", "swagger_ui", "redoc"}
    assert "X-Tenant" in body["auth"]


@pytest.mark.parametrize("word", ["all", "options", "export", "import"])
def test_a_word_never_reaches_a_detail_route(api: Any, word: str) -> None:
    # Ids are digits only: PUT /tools/all/ is the `all` route's 405, never a lookup of the id "all".
    resp = api.put(f"/api/v1/tools/{word}/", {"name": "x"}, format="json")
    assert resp.status_code in (404, 405), resp.content
    assert api.get("/api/v1/agents/abc/").status_code == 404


@pytest.mark.parametrize("page, asset", [("/api/v1/docs/", "swagger-ui"), ("/api/v1/redoc/", "redoc")])
def test_docs_load_their_assets_locally(api: Any, page: str, asset: str) -> None:
    client = Client()
    client.force_login(api.user)
    html = client.get(page).content.decode()
    assert "/static/drf_spectacular_sidecar/" in html and asset in html
    assert "cdn.jsdelivr" not in html and "unpkg.com" not in html and "https://" not in html.split("<body")[0]


def test_json_sent_as_a_form_says_so(api: Any) -> None:
    body = '{"name": "x", "type": "REMOTE", "config": {"headers": {"Authorization": "Bearer s3cr3t"}}}'
    resp = api.post("/api/v1/tools/", data=body, content_type="application/x-www-form-urlencoded")
    assert resp.status_code == 415
    error = resp.json()["error"]
    assert error["code"] == "unsupported_media_type"
    assert "Content-Type: application/json" in error["message"] and "looks like JSON" in error["message"]
    assert "s3cr3t" not in resp.content.decode() and "unknown field" not in error["message"]


def test_a_real_form_still_parses(api: Any) -> None:
    resp = api.post("/api/v1/tools/", data="name=x&type=NOPE", content_type="application/x-www-form-urlencoded")
    assert resp.status_code == 400 and resp.json()["error"]["code"] == "invalid"


def test_invalid_tool_type_lists_the_valid_ones(api: Any) -> None:
    resp = api.post("/api/v1/tools/", {"name": "x", "type": "MCP"}, format="json")
    assert resp.status_code == 400
    message = resp.json()["error"]["details"]["type"][0]
    assert "'MCP'" in message and "BUILTIN, LOCAL, REMOTE, HTTP" in message


def test_a_tenant_you_are_not_in_is_named_as_the_problem(api: Any, other_tenant: Any) -> None:
    foreign = api.get("/api/v1/tools/", HTTP_X_TENANT=other_tenant.slug)
    unknown = api.get("/api/v1/tools/", HTTP_X_TENANT="no-such-tenant")
    assert foreign.status_code == unknown.status_code == 404
    assert foreign.json() == unknown.json()  # never says whether the tenant exists
    error = foreign.json()["error"]
    assert error["code"] == "tenant_not_available" and "X-Tenant" in error["message"]
    assert error["details"]["your_tenants"] == ["acme"] and other_tenant.slug not in foreign.content.decode()


@pytest.mark.parametrize("path", [
    "/api/v1/tools/0/", "/api/v1/tools/0/status/", "/api/v1/agents/0/", "/api/v1/intents/0/",
    "/api/v1/models/0/", "/api/v1/market/sources/0/",
])
def test_options_on_a_detail_route_never_answers_5xx(api: Any, path: str) -> None:
    response = api.options(path)
    assert response.status_code < 500, response.content[:300]


def test_patch_agent_with_a_tools_item_lacking_tool_is_a_typed_400(api: Any) -> None:
    agent_id = api.post("/api/v1/agents/", {"name": "helper"}, format="json").json()["id"]
    response = api.patch(f"/api/v1/agents/{agent_id}/", {"tools": [{"allowed_functions": None}]}, format="json")
    assert response.status_code == 400, response.content[:300]
    assert set(response.json()["error"]) == {"code", "message", "details"}
