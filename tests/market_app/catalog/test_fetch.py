"""fetch_catalog against a real loopback server: formats, HTTP failures, caps, auth and registry paging."""

from __future__ import annotations

import json
from typing import Any

import pytest

from core.codes import ApiCode
from core.outbound import OutboundPolicy
from market_app.catalog import CatalogError, fetch_catalog, registry_endpoint
from tests.fixtures.catalog_server import CatalogServer, Registry
from tests.market_app.catalog.conftest import load
from tools_app.runtime.errors import OutboundBlocked, ResponseTooLarge, ToolTimeout


@pytest.mark.parametrize(
    ("fixture", "fmt", "detected", "count"),
    [
        ("list.json", "list", "list", 6),
        ("list.json", "auto", "list", 6),
        ("mcp_servers.json", "mcp_servers", "mcp_servers", 5),
        ("mcp_servers.json", "auto", "mcp_servers", 5),
    ],
)
def test_documents(server: CatalogServer, policy: OutboundPolicy, fixture: str, fmt: str, detected: str,
                   count: int) -> None:
    server.json("/catalog.json", load(fixture))
    result = fetch_catalog(server.url("/catalog.json"), fmt, policy=policy, headers={})
    assert (result.format, len(result.entries), result.full, result.pages) == (detected, count, True, 1)
    assert result.errors  # the fixtures carry bad items on purpose; they are reported, not dropped


def test_json_served_as_text_plain_is_accepted(server: CatalogServer, policy: OutboundPolicy) -> None:
    server.json("/c", [{"name": "a", "url": "https://a.test/mcp"}], content_type="text/plain")
    assert [e.name for e in fetch_catalog(server.url("/c"), policy=policy).entries] == ["a"]


def test_html_instead_of_json(server: CatalogServer, policy: OutboundPolicy) -> None:
    server.raw("/page", "<!doctype html>\n<html><body>Log in to continue</body></html>")
    with pytest.raises(CatalogError) as info:
        fetch_catalog(server.url("/page"), "list", policy=policy)
    assert info.value.code == "not_json"
    assert "text/html" in info.value.message and "<!doctype html> <html>" in info.value.message


def test_object_without_data(server: CatalogServer, policy: OutboundPolicy) -> None:
    server.json("/obj", {"items": [1, 2]})
    with pytest.raises(CatalogError) as info:
        fetch_catalog(server.url("/obj"), "auto", policy=policy)
    assert info.value.code == ApiCode.NOT_A_CATALOG
    assert '{"data": [...]}' in info.value.message  # names the shapes it accepts


@pytest.mark.parametrize(("status", "code"), [(404, "http_error"), (500, "http_error"), (401, "auth_failed"),
                                              (403, "auth_failed")])
def test_http_errors(server: CatalogServer, policy: OutboundPolicy, status: int, code: str) -> None:
    server.json("/x", {"error": "nope"}, status=status)
    with pytest.raises(CatalogError) as info:
        fetch_catalog(server.url("/x"), "list", policy=policy)
    assert info.value.code == code and f"HTTP {status}" in info.value.message


def test_auth_header_wrong_then_right(server: CatalogServer, policy: OutboundPolicy) -> None:
    server.json("/private", {"data": [{"name": "a", "url": "https://a.test/mcp"}]},
                require={"Authorization": "Bearer right-token"})
    with pytest.raises(CatalogError) as info:
        fetch_catalog(server.url("/private"), "list", policy=policy, headers={"Authorization": "Bearer wrong-token"})
    assert info.value.code == ApiCode.AUTH_FAILED
    assert "wrong-token" not in repr(info.value)
    result = fetch_catalog(server.url("/private"), "list", policy=policy,
                           headers={"Authorization": "Bearer right-token"})
    assert [e.name for e in result.entries] == ["a"]


def test_response_over_the_cap(server: CatalogServer) -> None:
    server.big("/huge", 10 * 1024 * 1024)
    small = OutboundPolicy.build("127.0.0.0/8,::1", max_bytes=256 * 1024, timeout_s=5)
    with pytest.raises(ResponseTooLarge) as info:
        fetch_catalog(server.url("/huge"), "list", policy=small)
    assert info.value.code == ApiCode.RESPONSE_TOO_LARGE and info.value.details == {"max_bytes": 262144}


def test_hanging_server_times_out(server: CatalogServer) -> None:
    server.hang("/slow")
    quick = OutboundPolicy.build("127.0.0.0/8,::1", timeout_s=1)
    with pytest.raises(ToolTimeout) as info:  # the server never answers: only the policy's timeout ends the fetch
        fetch_catalog(server.url("/slow"), "list", policy=quick)
    assert info.value.code == ApiCode.TIMEOUT and info.value.details == {"timeout_s": 1}


def test_loopback_is_blocked_without_allow(server: CatalogServer) -> None:
    server.json("/c", [])
    with pytest.raises(OutboundBlocked):
        fetch_catalog(server.url("/c"), "list", policy=OutboundPolicy.build(""))


# --- official registry ---------------------------------------------------------------------------------

def test_registry_pagination_follows_next_cursor(server: CatalogServer, policy: OutboundPolicy) -> None:
    server.registry(Registry.generate(250))
    result = fetch_catalog(server.base, "official_registry", policy=policy, headers={}, page_limit=100)
    assert (len(result.entries), result.pages, result.full, result.errors) == (250, 3, True, [])
    assert len({e.name for e in result.entries}) == 250
    assert [r.query.get("cursor") for r in server.seen("/v0.1/servers")] == [None, "100", "200"]
    assert all(r.query["limit"] == "100" and r.query["version"] == "latest" for r in server.requests)
    assert result.next_updated_since == "2025-01-01T00:04:09Z"  # the newest updatedAt (index 249)
    assert {e.kind for e in result.entries} == {"LOCAL", "REMOTE"}


def test_registry_incremental_passes_updated_since(server: CatalogServer, policy: OutboundPolicy) -> None:
    server.registry(Registry.generate(50))
    result = fetch_catalog(server.base, "official_registry", policy=policy, updated_since="2025-01-01T00:00:39Z")
    assert [r.query.get("updated_since") for r in server.requests] == ["2025-01-01T00:00:39Z"]
    assert [e.name for e in result.entries] == [f"io.example/server-{i:05d}" for i in range(40, 50)]
    assert result.full is False and result.next_updated_since == "2025-01-01T00:00:49Z"


def test_registry_incremental_with_nothing_new_keeps_the_watermark(
    server: CatalogServer, policy: OutboundPolicy
) -> None:
    server.registry(Registry.generate(10))
    result = fetch_catalog(server.base, "official_registry", policy=policy, updated_since="2030-01-01T00:00:00Z")
    assert (result.entries, result.full, result.next_updated_since) == ([], False, "2030-01-01T00:00:00Z")


def test_registry_resume_from_cursor_is_not_full(server: CatalogServer, policy: OutboundPolicy) -> None:
    server.registry(Registry.generate(30))
    result = fetch_catalog(server.base, "official_registry", policy=policy, cursor="20", page_limit=10)
    assert (len(result.entries), result.full) == (10, False)


def test_registry_cursor_loop_detected(server: CatalogServer, policy: OutboundPolicy) -> None:
    server.registry(Registry.generate(5, loop=True))
    with pytest.raises(CatalogError) as info:
        fetch_catalog(server.base, "official_registry", policy=policy)
    assert info.value.code == "cursor_loop"
    assert len(server.requests) == 2


def test_registry_max_pages(server: CatalogServer, policy: OutboundPolicy) -> None:
    server.registry(Registry.generate(50))
    with pytest.raises(CatalogError) as info:
        fetch_catalog(server.base, "official_registry", policy=policy, page_limit=10, max_pages=2)
    assert info.value.code == ApiCode.TOO_MANY_PAGES and len(server.requests) == 2


def test_registry_duplicates_across_pages(server: CatalogServer, policy: OutboundPolicy) -> None:
    registry = server.registry(Registry.generate(4))
    registry.items.append(registry.items[0])
    result = fetch_catalog(server.base, "official_registry", policy=policy, page_limit=2)
    assert len(result.entries) == 4
    assert [(e.name, "duplicate" in e.reason) for e in result.errors] == [("io.example/server-00000", True)]


def test_registry_auth(server: CatalogServer, policy: OutboundPolicy) -> None:
    server.registry(Registry.generate(3), require={"X-Api-Key": "k1"})
    with pytest.raises(CatalogError) as info:
        fetch_catalog(server.base, "official_registry", policy=policy, headers={"X-Api-Key": "k0"})
    assert info.value.code == ApiCode.AUTH_FAILED
    ok = fetch_catalog(server.base, "official_registry", policy=policy, headers={"X-Api-Key": "k1"})
    assert len(ok.entries) == 3


def test_registry_page_that_is_not_a_page(server: CatalogServer, policy: OutboundPolicy) -> None:
    server.json("/v0.1/servers", {"data": []})
    with pytest.raises(CatalogError) as info:
        fetch_catalog(server.base, "official_registry", policy=policy)
    assert info.value.code == ApiCode.NOT_A_CATALOG
    assert '{"servers": [...]} on page 1' in info.value.message  # names the shape expected and the page


@pytest.mark.parametrize("path", ["/v0.1/servers", ""])
def test_auto_detects_registry(server: CatalogServer, policy: OutboundPolicy, path: str) -> None:
    """Given the endpoint itself, or the registry's base URL (whose root is not a catalog)."""
    server.registry(Registry.generate(120))
    server.raw("/", "<html>registry home</html>")
    result = fetch_catalog(server.url(path) if path else server.base + "/", "auto", policy=policy)
    assert (result.format, len(result.entries), result.full) == ("official_registry", 120, True)


def test_auto_reports_the_original_error_when_no_registry(server: CatalogServer, policy: OutboundPolicy) -> None:
    server.raw("/index.html", "<html>hello</html>")
    with pytest.raises(CatalogError) as info:
        fetch_catalog(server.url("/index.html"), "auto", policy=policy)
    assert info.value.code == ApiCode.NOT_JSON and "text/html" in info.value.message  # names the type it got


@pytest.mark.parametrize(
    ("url", "endpoint"),
    [
        ("https://registry.test", "https://registry.test/v0.1/servers"),
        ("https://registry.test/", "https://registry.test/v0.1/servers"),
        ("https://registry.test/v0.1/servers?search=x", "https://registry.test/v0.1/servers?search=x"),
        ("https://mirror.test/mcp/", "https://mirror.test/mcp/v0.1/servers"),
    ],
)
def test_registry_endpoint(url: str, endpoint: str) -> None:
    assert registry_endpoint(url) == endpoint


def test_existing_query_parameters_are_kept(server: CatalogServer, policy: OutboundPolicy) -> None:
    server.registry(Registry.generate(3))
    fetch_catalog(server.url("/v0.1/servers?search=server"), "official_registry", policy=policy)
    query: dict[str, Any] = server.requests[0].query
    assert query["search"] == "server" and query["limit"] == "100"


# --- redirects -----------------------------------------------------------------------------------------

def test_same_origin_redirect_is_followed(server: CatalogServer, policy: OutboundPolicy) -> None:
    server.json("/new.json", [{"name": "a", "url": "https://a.test/mcp"}])
    server.redirect("/old.json", "/new.json", status=301)
    assert [e.name for e in fetch_catalog(server.url("/old.json"), policy=policy).entries] == ["a"]


def test_auth_headers_are_not_sent_to_another_origin(server: CatalogServer, policy: OutboundPolicy) -> None:
    with CatalogServer() as other:
        other.json("/x", [])
        server.redirect("/r", other.url("/x"))
        fetch_catalog(server.url("/r"), "list", policy=policy, headers={"X-Api-Key": "source-secret"})
        assert "x-api-key" not in other.requests[0].headers


def test_a_name_that_does_not_resolve_is_dns_failed_not_blocked(policy: OutboundPolicy) -> None:
    with pytest.raises(OutboundBlocked) as caught:  # still a guard failure for every existing handler
        fetch_catalog("http://no-such-host.invalid/catalog.json", policy=policy)
    assert caught.value.code == "dns_failed"
    assert "cannot resolve host 'no-such-host.invalid'" in caught.value.message


def test_incremental_sync_ignores_changes_to_older_versions(server: CatalogServer, policy: OutboundPolicy) -> None:
    registry = server.registry(Registry.generate(2))
    old = json.loads(json.dumps(registry.items[0]))
    old["server"]["version"] = "0.9.0"
    old["_meta"]["io.modelcontextprotocol.registry/official"].update(
        isLatest=False, status="deleted", updatedAt="2025-06-01T00:00:00Z")
    registry.items.append(old)  # a registry ignoring version=latest sends the old version's deletion
    partial = fetch_catalog(server.base, "official_registry", policy=policy, updated_since="2025-02-01T00:00:00Z")
    assert partial.full is False and partial.entries == [] and partial.errors == []
    full = fetch_catalog(server.base, "official_registry", policy=policy)
    assert [(e.version, e.status) for e in full.entries if e.name == "io.example/server-00000"] == [("1.0.0", "active")]
