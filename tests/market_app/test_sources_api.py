"""Sources API: CRUD, write-only auth headers (keep/replace/mask/clear), scopes and tenant isolation."""

from __future__ import annotations

from typing import Any

import pytest

from market_app.models import MarketSource
from tests.factories import UserFactory
from tests.market_app.factories import EntryFactory, SourceFactory

pytestmark = pytest.mark.django_db

CANARY = "canary-hdr-91ab"
URL = "https://catalog.example.test/servers.json"


def create(api: Any, **body: Any) -> Any:
    return api.post("/api/v1/market/sources/", {"name": "Cat", "url": URL, **body}, format="json")


def test_create_shows_masked_header_names_only(api: Any) -> None:
    resp = create(api, auth_headers={"Authorization": f"Bearer {CANARY}"})
    assert resp.status_code == 201, resp.content
    body = resp.json()
    assert body["auth_headers_set"] is True
    assert body["auth_headers"] == {"Authorization": "********"}
    assert body["is_global"] is False and body["format"] == "auto"
    assert CANARY not in resp.content.decode()
    stored = MarketSource.objects.get(pk=body["id"])
    assert stored.auth_headers == {"Authorization": f"Bearer {CANARY}"}


def test_auth_headers_are_encrypted_at_rest(api: Any) -> None:
    from django.db import connection

    source_id = create(api, auth_headers={"X-Key": CANARY}).json()["id"]
    with connection.cursor() as cur:
        cur.execute("SELECT auth_headers FROM market_app_marketsource WHERE id = %s", [source_id])
        raw = cur.fetchone()[0]
    assert CANARY not in raw


def test_update_keeps_replaces_and_clears_headers(api: Any) -> None:
    source_id = create(api, auth_headers={"Authorization": CANARY, "X-Other": "two-2222"}).json()["id"]
    url = f"/api/v1/market/sources/{source_id}/"
    api.patch(url, {"name": "Renamed"}, format="json")  # omitted keeps
    assert MarketSource.objects.get(pk=source_id).auth_headers == {"Authorization": CANARY, "X-Other": "two-2222"}
    api.patch(url, {"auth_headers": ""}, format="json")  # "" keeps
    assert MarketSource.objects.get(pk=source_id).auth_headers["Authorization"] == CANARY
    resp = api.patch(url, {"auth_headers": {"Authorization": "********", "X-New": "new-3333"}}, format="json")
    assert resp.status_code == 200, resp.content
    assert MarketSource.objects.get(pk=source_id).auth_headers == {"Authorization": CANARY, "X-New": "new-3333"}
    assert resp.json()["auth_headers"] == {"Authorization": "********", "X-New": "********"}
    resp = api.patch(url, {"auth_headers": None}, format="json")
    assert resp.json()["auth_headers_set"] is False
    assert MarketSource.objects.get(pk=source_id).auth_headers is None


def test_mask_without_stored_value_is_refused_by_name(api: Any) -> None:
    resp = create(api, auth_headers={"Authorization": "********"})
    assert resp.status_code == 400
    err = resp.json()["error"]
    assert err["code"] == "invalid_source" and err["details"] == {"field": "auth_headers.Authorization"}


@pytest.mark.parametrize(("headers", "field", "fragment"), [
    ({"Bad Header": "x"}, "auth_headers", "'Bad Header' is not a valid HTTP header name"),
    ({"X-Key": 5}, "auth_headers.X-Key", ""),
    ({"X-Key": "a\r\nInjected: 1"}, "auth_headers.X-Key", ""),
    (["X-Key"], "auth_headers", "must be an object"),
])
def test_invalid_auth_headers_are_named_not_echoed(api: Any, headers: Any, field: str, fragment: str) -> None:
    resp = create(api, auth_headers=headers)
    assert resp.status_code == 400
    error = resp.json()["error"]
    assert error["code"] == "invalid_source" and error["details"] == {"field": field}
    assert fragment in error["message"]  # the two refusals of the whole field say which rule (and name the bad key)
    assert "Injected" not in resp.content.decode()


@pytest.mark.parametrize(("body", "code", "field"), [
    ({"url": "ftp://example.test/x"}, "invalid_source", "url"),
    ({"url": "not a url"}, "invalid_source", "url"),
    ({"format": "xml"}, "invalid", "format"),
    ({"refresh_interval_min": 0}, "invalid_source", "refresh_interval_min"),
    ({"colour": "blue"}, "invalid", "colour"),
])
def test_invalid_source_fields(api: Any, body: dict[str, Any], code: str, field: str) -> None:
    resp = create(api, **body)
    assert resp.status_code == 400
    error = resp.json()["error"]
    # The service names the field in details.field; the input serializer keys its details by the field.
    named = error["details"].get("field") if code == "invalid_source" else next(iter(error["details"]))
    assert error["code"] == code and named == field


def test_url_or_format_change_resets_the_incremental_cursor(api: Any, tenant: Any) -> None:
    source = SourceFactory(tenant=tenant, cursor="2025-01-01T00:00:00Z")
    api.patch(f"/api/v1/market/sources/{source.pk}/", {"url": URL}, format="json")
    source.refresh_from_db()
    assert source.cursor == ""


def test_global_source_needs_a_superuser(api: Any, tenant: Any, member_client: Any) -> None:
    resp = create(api, is_global=True)
    assert resp.status_code == 403
    root = member_client(tenant, "owner", user=UserFactory(username="root", is_superuser=True))
    resp = create(root, is_global=True)
    assert resp.status_code == 201 and resp.json()["is_global"] is True
    source_id = resp.json()["id"]
    assert api.patch(f"/api/v1/market/sources/{source_id}/", {"name": "x"}, format="json").status_code == 403
    assert api.delete(f"/api/v1/market/sources/{source_id}/").status_code == 403
    assert root.delete(f"/api/v1/market/sources/{source_id}/").status_code == 204


def test_scope_cannot_change(api: Any, tenant: Any) -> None:
    source = SourceFactory(tenant=tenant)
    resp = api.patch(f"/api/v1/market/sources/{source.pk}/", {"is_global": True}, format="json")
    assert resp.status_code == 400


def test_members_read_but_do_not_manage(tenant: Any, member_client: Any) -> None:
    SourceFactory(tenant=tenant)
    member = member_client(tenant, "member")
    assert member.get("/api/v1/market/sources/").json()["count"] == 1
    assert create(member).status_code == 403


def test_tenant_isolation_of_sources_and_entries(api: Any, other_api: Any, tenant: Any) -> None:
    own = SourceFactory(tenant=tenant, name="acme-only")
    entry = EntryFactory(source=own)
    shared = SourceFactory(tenant=None, name="everyone")
    shared_entry = EntryFactory(source=shared)

    assert [s["name"] for s in other_api.get("/api/v1/market/sources/").json()["results"]] == ["everyone"]
    assert sorted(s["name"] for s in api.get("/api/v1/market/sources/").json()["results"]) == ["acme-only",
                                                                                               "everyone"]
    for kind, pk in (("sources", own.pk), ("entries", entry.pk)):
        foreign = other_api.get(f"/api/v1/market/{kind}/{pk}/")
        missing = other_api.get(f"/api/v1/market/{kind}/999999/")
        assert foreign.status_code == missing.status_code == 404
        assert foreign.json() == missing.json()
    for method, path, body in (
        ("patch", f"/api/v1/market/sources/{own.pk}/", {"name": "x"}),
        ("delete", f"/api/v1/market/sources/{own.pk}/", None),
        ("post", f"/api/v1/market/sources/{own.pk}/refresh/", None),
        ("post", f"/api/v1/market/entries/{entry.pk}/load/", {}),
    ):
        resp = getattr(other_api, method)(path, body, format="json")
        assert resp.status_code == 404, (method, path)
    other_entries = other_api.get("/api/v1/market/entries/").json()
    assert other_entries["count"] == 1 and other_entries["results"][0]["id"] == shared_entry.pk
    assert other_api.get(f"/api/v1/market/entries/?source={own.pk}").json()["count"] == 0
    assert other_api.get(f"/api/v1/market/sources/{shared.pk}/").status_code == 200


def test_entries_filters_and_pagination(api: Any, tenant: Any) -> None:
    source = SourceFactory(tenant=tenant)
    other = SourceFactory(tenant=tenant)
    EntryFactory(source=source, name="weather", description="forecasts", kind="REMOTE",
                 install={"url": "https://w.example.test/mcp", "transport": "sse", "headers": {}})
    EntryFactory(source=source, name="files", kind="LOCAL")
    EntryFactory(source=other, name="old", status="deprecated")
    for _ in range(3):
        EntryFactory(source=other)

    def names(query: str) -> list[str]:
        return [e["name"] for e in api.get(f"/api/v1/market/entries/?{query}").json()["results"]]

    assert names(f"source={source.pk}") == ["files", "weather"]
    assert names("q=forecast") == ["weather"]
    assert names("kind=REMOTE") == ["weather"]
    assert names("status=deprecated") == ["old"]
    page = api.get("/api/v1/market/entries/?page_size=2").json()
    assert page["count"] == 6 and len(page["results"]) == 2 and page["next"]
    entry = page["results"][0]
    assert {"id", "source", "install", "required_env", "suggested_name", "content_hash"} <= set(entry)


def test_source_shows_entry_count_and_last_result(api: Any, tenant: Any) -> None:
    source = SourceFactory(tenant=tenant, last_status="ok", last_counts={"added": 2})
    EntryFactory(source=source)
    EntryFactory(source=source, status="removed")
    body = api.get(f"/api/v1/market/sources/{source.pk}/").json()
    assert body["entry_count"] == 1 and body["last_counts"] == {"added": 2} and body["refreshing"] is False


def test_delete_source_keeps_loaded_tools(api: Any, tenant: Any) -> None:
    source = SourceFactory(tenant=tenant)
    entry = EntryFactory(source=source)
    tool_id = api.post(f"/api/v1/market/entries/{entry.pk}/load/", {}, format="json").json()["tool"]["id"]
    assert api.delete(f"/api/v1/market/sources/{source.pk}/").status_code == 204
    tool = api.get(f"/api/v1/tools/{tool_id}/").json()
    assert tool["market"] is None


def test_openapi_lists_market_paths(api: Any) -> None:
    paths = api.get("/api/v1/schema/", HTTP_ACCEPT="application/json").json()["paths"]
    for path in ("/api/v1/market/sources/", "/api/v1/market/sources/{id}/refresh/", "/api/v1/market/entries/",
                 "/api/v1/market/entries/{id}/load/", "/api/v1/market/entries/batch-load/",
                 "/api/v1/tools/{id}/market-update/"):
        assert path in paths, path
