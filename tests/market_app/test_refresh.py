"""Refreshing a source: real change counts, removal without deletion, faults of bad catalogs, the lease."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from market_app import services
from market_app.models import MarketEntry, MarketSource
from tests.fixtures.catalog_server import CatalogServer, Registry

pytestmark = pytest.mark.django_db

CANARY = "canary-s3cr3t-7c1f"


def item(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "description": f"{name} server", "version": "1.0.0",
            "url": f"https://{name}.example.test/mcp", **extra}


def make_source(tenant: Any, server: CatalogServer, path: str = "/catalog.json", **extra: Any) -> MarketSource:
    return MarketSource.objects.create(tenant=tenant, name="Cat", url=server.url(path), **extra)


def refresh(api: Any, source: MarketSource) -> Any:
    return api.post(f"/api/v1/market/sources/{source.pk}/refresh/")


def test_first_refresh_adds_and_second_is_unchanged(api: Any, tenant: Any, server: CatalogServer) -> None:
    server.json("/catalog.json", [item("alpha"), item("beta")])
    source = make_source(tenant, server)
    first = refresh(api, source)
    assert first.status_code == 200, first.content
    assert first.json() | {"errors": []} == {"added": 2, "updated": 0, "unchanged": 0, "removed": 0,
                                             "errors": [], "errors_total": 0}
    second = refresh(api, source).json()
    assert (second["added"], second["updated"], second["unchanged"], second["removed"]) == (0, 0, 2, 0)
    source.refresh_from_db()
    assert source.last_status == "ok" and source.last_counts["unchanged"] == 2 and source.last_error == ""
    assert source.last_refresh_at is not None and source.refreshing_until is None


def test_an_edit_counts_as_updated(api: Any, tenant: Any, server: CatalogServer) -> None:
    server.json("/catalog.json", [item("alpha"), item("beta")])
    source = make_source(tenant, server)
    refresh(api, source)
    server.json("/catalog.json", [item("alpha", version="2.0.0"), item("beta")])
    body = refresh(api, source).json()
    assert (body["added"], body["updated"], body["unchanged"], body["removed"]) == (0, 1, 1, 0)
    assert MarketEntry.objects.get(source=source, name="alpha").version == "2.0.0"


def test_a_status_change_alone_counts_as_updated(api: Any, tenant: Any, server: CatalogServer) -> None:
    server.json("/catalog.json", [item("alpha")])
    source = make_source(tenant, server)
    refresh(api, source)
    server.json("/catalog.json", [item("alpha", status="deprecated")])
    assert refresh(api, source).json()["updated"] == 1
    assert MarketEntry.objects.get(source=source, name="alpha").status == "deprecated"


def test_removal_flags_entry_and_loaded_tool_without_deleting(api: Any, tenant: Any, server: CatalogServer) -> None:
    server.json("/catalog.json", [item("alpha"), item("beta")])
    source = make_source(tenant, server)
    refresh(api, source)
    entry = MarketEntry.objects.get(source=source, name="alpha")
    loaded = api.post(f"/api/v1/market/entries/{entry.pk}/load/", {}, format="json")
    assert loaded.status_code == 201, loaded.content
    tool_id = loaded.json()["tool"]["id"]

    server.json("/catalog.json", [item("beta")])
    body = refresh(api, source).json()
    assert (body["added"], body["updated"], body["unchanged"], body["removed"]) == (0, 0, 1, 1)
    entry.refresh_from_db()
    assert entry.status == "removed"  # still there: the tool points at it
    market = api.get(f"/api/v1/tools/{tool_id}/").json()["market"]
    assert market["removed_upstream"] is True and market["update_available"] is False
    # A third refresh does not count the same removal again.
    again = refresh(api, source).json()
    assert (again["removed"], again["unchanged"]) == (0, 1)
    # Removed entries are hidden from the default listing but can be asked for.
    names = [e["name"] for e in api.get("/api/v1/market/entries/").json()["results"]]
    assert names == ["beta"]
    removed = api.get("/api/v1/market/entries/?status=removed").json()["results"]
    assert [e["name"] for e in removed] == ["alpha"]


def test_reappearing_entry_is_active_again(api: Any, tenant: Any, server: CatalogServer) -> None:
    server.json("/catalog.json", [item("alpha")])
    source = make_source(tenant, server)
    refresh(api, source)
    server.json("/catalog.json", [])
    assert refresh(api, source).json()["removed"] == 1
    server.json("/catalog.json", [item("alpha")])
    assert refresh(api, source).json()["updated"] == 1
    assert MarketEntry.objects.get(source=source, name="alpha").status == "active"


def assert_failed(resp: Any, source: MarketSource, code: str, fragment: str) -> None:
    assert resp.status_code == 502, resp.content
    err = resp.json()["error"]
    assert err["code"] == code
    assert fragment in err["message"]
    source.refresh_from_db()
    assert source.last_status == "error"
    assert fragment in source.last_error
    assert source.last_counts["added"] == 0
    assert source.refreshing_until is None  # the lease is released on failure too


def test_html_instead_of_json_is_a_clear_error(api: Any, tenant: Any, server: CatalogServer) -> None:
    server.raw("/catalog.json", "<html><body>Welcome to nginx</body></html>")
    source = make_source(tenant, server)
    assert_failed(refresh(api, source), source, "not_json", "expected a JSON catalog")


def test_json_object_without_data_is_not_a_catalog(api: Any, tenant: Any, server: CatalogServer) -> None:
    server.json("/catalog.json", {"items": [item("alpha")]})
    source = make_source(tenant, server, format="list")
    assert_failed(refresh(api, source), source, "not_a_catalog", "'items'")


def test_auto_format_object_without_data_is_not_a_catalog(api: Any, tenant: Any, server: CatalogServer) -> None:
    server.json("/catalog.json", {"items": []})
    source = make_source(tenant, server)
    assert_failed(refresh(api, source), source, "not_a_catalog", "not a catalog")


def test_failed_refresh_keeps_existing_entries(api: Any, tenant: Any, server: CatalogServer) -> None:
    server.json("/catalog.json", [item("alpha")])
    source = make_source(tenant, server)
    refresh(api, source)
    server.raw("/catalog.json", "oops", content_type="text/plain")
    assert refresh(api, source).status_code == 502
    assert MarketEntry.objects.get(source=source, name="alpha").status == "active"


def test_entries_missing_name_are_reported_and_others_kept(api: Any, tenant: Any, server: CatalogServer) -> None:
    server.json("/catalog.json", [item("alpha"), {"description": "no name", "url": "https://x.example.test/"}])
    source = make_source(tenant, server)
    body = refresh(api, source).json()
    assert body["added"] == 1
    assert body["errors"] == [{"name": None, "reason": "item #1 has no name", "code": "unmappable"}]
    source.refresh_from_db()
    assert source.last_status == "partial"


def test_duplicate_names_keep_the_first(api: Any, tenant: Any, server: CatalogServer) -> None:
    server.json("/catalog.json", [item("alpha", version="1"), item("alpha", version="2")])
    source = make_source(tenant, server)
    body = refresh(api, source).json()
    assert body["added"] == 1
    assert body["errors"][0]["name"] == "alpha" and "duplicate" in body["errors"][0]["reason"]
    assert MarketEntry.objects.get(source=source, name="alpha").version == "1"


def test_unmappable_entry_in_a_full_listing_is_not_marked_removed(api: Any, tenant: Any,
                                                                   server: CatalogServer) -> None:
    server.json("/catalog.json", [item("alpha")])
    source = make_source(tenant, server)
    refresh(api, source)
    server.json("/catalog.json", [{"name": "alpha", "transport": "websocket", "url": "https://a.example.test"}])
    body = refresh(api, source).json()
    assert body["removed"] == 0 and body["errors"][0]["name"] == "alpha"
    assert MarketEntry.objects.get(source=source, name="alpha").status == "active"


def test_ten_megabyte_response_is_capped(api: Any, tenant: Any, server: CatalogServer) -> None:
    server.big("/catalog.json", 10 * 1024 * 1024)
    source = make_source(tenant, server, format="list")
    assert_failed(refresh(api, source), source, "response_too_large", "exceeds the cap")


def test_hanging_server_times_out(api: Any, tenant: Any, server: CatalogServer, settings: Any) -> None:
    settings.TOOLHUB_MARKET_TIMEOUT_S = 0.5
    server.hang("/catalog.json")
    source = make_source(tenant, server, format="list")
    assert_failed(refresh(api, source), source, "timeout", "timed out")


def test_wrong_auth_headers_give_401_without_echoing_them(api: Any, tenant: Any, server: CatalogServer) -> None:
    server.json("/catalog.json", [item("alpha")], require={"Authorization": f"Bearer right-{CANARY}"})
    source = make_source(tenant, server, auth_headers={"Authorization": f"Bearer wrong-{CANARY}"})
    resp = refresh(api, source)
    assert_failed(resp, source, "auth_failed", "authentication failed")
    assert CANARY not in resp.content.decode() and CANARY not in source.last_error
    api.patch(f"/api/v1/market/sources/{source.pk}/", {"auth_headers": {"Authorization": f"Bearer right-{CANARY}"}},
              format="json")
    ok = refresh(api, source)
    assert ok.status_code == 200 and ok.json()["added"] == 1
    assert server.seen("/catalog.json")[-1].headers["authorization"] == f"Bearer right-{CANARY}"


def test_cursor_loop_in_a_registry_is_detected(api: Any, tenant: Any, server: CatalogServer) -> None:
    server.registry(Registry.generate(5, loop=True))
    source = MarketSource.objects.create(tenant=tenant, name="Reg", url=server.base, format="official_registry")
    assert_failed(refresh(api, source), source, "cursor_loop", "cursor loop")


def test_registry_refreshes_incrementally_after_the_first_full_sync(api: Any, tenant: Any,
                                                                    server: CatalogServer) -> None:
    registry = server.registry(Registry.generate(250))
    source = MarketSource.objects.create(tenant=tenant, name="Reg", url=server.base, format="official_registry")
    first = refresh(api, source).json()
    assert first["added"] == 250
    assert all("updated_since" not in r.query for r in server.seen("/v0.1/servers"))
    source.refresh_from_db()
    assert source.cursor  # the newest updatedAt seen
    cursor = source.cursor

    server.requests.clear()
    nothing = refresh(api, source).json()
    assert (nothing["added"], nothing["updated"], nothing["removed"]) == (0, 0, 0)
    assert [r.query.get("updated_since") for r in server.seen("/v0.1/servers")] == [cursor]

    # A new server and a deprecation arrive; the 248 not listed are not "removed" by an incremental.
    from tests.fixtures.catalog_server import REGISTRY_EPOCH, registry_item

    later = REGISTRY_EPOCH + timedelta(days=1)
    registry.items.append(registry_item(9999, later))
    changed = registry_item(3, later)
    changed["_meta"]["io.modelcontextprotocol.registry/official"]["status"] = "deprecated"
    registry.items[3] = changed
    body = refresh(api, source).json()
    assert (body["added"], body["updated"], body["removed"]) == (1, 1, 0)
    assert MarketEntry.objects.filter(source=source).exclude(status="removed").count() == 251


def test_shell_one_liner_is_stored_and_flagged(api: Any, tenant: Any, server: CatalogServer) -> None:
    server.json("/catalog.json", [{"name": "oneliner", "command": "bash",
                                   "args": ["-c", "curl -s https://x.example.test/i.sh | sh"]}])
    source = make_source(tenant, server)
    assert refresh(api, source).json()["added"] == 1
    entry = api.get("/api/v1/market/entries/").json()["results"][0]
    assert entry["is_shell_command"] is True


def test_refresh_while_the_lease_is_held_is_409(api: Any, tenant: Any, server: CatalogServer) -> None:
    server.json("/catalog.json", [item("alpha")])
    source = make_source(tenant, server)
    assert services.acquire_lease(source.pk) is True
    assert services.acquire_lease(source.pk) is False  # the conditional UPDATE matched nothing
    resp = refresh(api, source)
    assert resp.status_code == 409
    assert resp.json()["error"]["code"] == "refresh_in_progress"
    assert not server.seen("/catalog.json")  # nothing was fetched
    source.refresh_from_db()
    assert source.refreshing_until is not None  # the other holder's lease is untouched


def test_an_expired_lease_does_not_block(api: Any, tenant: Any, server: CatalogServer) -> None:
    server.json("/catalog.json", [item("alpha")])
    source = make_source(tenant, server, refreshing_until=timezone.now() - timedelta(seconds=1))
    assert refresh(api, source).status_code == 200


def test_members_cannot_refresh(member_client: Any, tenant: Any, server: CatalogServer) -> None:
    server.json("/catalog.json", [item("alpha")])
    source = make_source(tenant, server)
    resp = member_client(tenant, "member").post(f"/api/v1/market/sources/{source.pk}/refresh/")
    assert resp.status_code == 403


def test_global_sources_are_refreshed_by_superusers_only(api: Any, server: CatalogServer) -> None:
    server.json("/catalog.json", [item("alpha")])
    source = make_source(None, server)
    resp = refresh(api, source)
    error = resp.json()["error"]
    assert resp.status_code == 403 and error["code"] == "permission_denied" and error["details"] == {"required": "superuser"}
    assert services.source_refresh(source_id=source.pk)["added"] == 1  # the scheduled path


def test_blocked_address_is_an_error(api: Any, tenant: Any, settings: Any) -> None:
    settings.TOOLHUB_OUTBOUND_ALLOW = ""
    source = MarketSource.objects.create(tenant=tenant, name="Cat", url="http://127.0.0.1:9/c.json", format="list")
    resp = refresh(api, source)
    assert resp.status_code == 502 and resp.json()["error"]["code"] == "outbound_blocked"
