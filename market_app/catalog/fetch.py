"""Fetch a catalog over the outbound guard: one GET for documents, cursor paging for the MCP registry."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from core.codes import ApiCode
from core.outbound import FetchedResponse, OutboundPolicy, fetch, safe_url
from market_app.catalog.common import VersionCollector
from market_app.catalog.parsers import describe, detect, parse_document, parse_official_registry
from market_app.catalog.registry import Prefer, not_latest
from market_app.catalog.types import FORMATS, CatalogError, EntryData, EntryError

REGISTRY_PATH = "/v0.1/servers"
EXCERPT_CHARS = 120


@dataclass
class FetchResult:
    """Everything one refresh read.

    `full` is True only for a complete listing (no `updated_since`, no starting cursor): only then may
    the caller mark entries it did not see as removed. `next_updated_since` is what to pass as
    `updated_since` next time (registry only): the newest `updatedAt` seen (the registry's own clock),
    else the `updated_since` given, else the time this fetch started. A name repeated on a later page is
    an EntryError, like a duplicate within one page.
    """

    entries: list[EntryData] = field(default_factory=list)
    errors: list[EntryError] = field(default_factory=list)
    full: bool = True
    next_updated_since: str | None = None
    format: str = ""
    pages: int = 0


def fetch_catalog(
    url: str,
    fmt: str = "auto",
    *,
    policy: OutboundPolicy,
    headers: Mapping[str, str] | None = None,
    cursor: str | None = None,
    updated_since: str | None = None,
    page_limit: int = 100,
    max_pages: int = 1000,
    prefer: Prefer = "remote",
) -> FetchResult:
    """Read the catalog at `url` in format `fmt` ("auto" detects it from the first response).

    Raises CatalogError (not a catalog, HTTP error, authentication, cursor loop, too many pages) or the
    guard's OutboundBlocked / ResponseTooLarge / ToolTimeout. Messages never carry header values or
    query strings. For "auto", a URL that does not answer with a catalog is retried as a registry base
    (`{url}/v0.1/servers`) before its own error is raised.
    """
    if fmt not in FORMATS:
        raise CatalogError(f"unknown catalog format {fmt!r}; accepted: {', '.join(FORMATS)}",
                           code=ApiCode.UNKNOWN_FORMAT)
    if not 1 <= page_limit <= 100:
        raise ValueError("page_limit must be within 1..100 (the registry's own bounds)")
    hdrs = dict(headers or {})

    def registry(endpoint: str) -> FetchResult:
        return _fetch_registry(endpoint, policy, hdrs, cursor, updated_since, page_limit, max_pages, prefer)

    if fmt == "official_registry":
        return registry(registry_endpoint(url))
    if fmt != "auto":
        return _document(get_json(url, policy, hdrs), fmt, prefer)
    try:
        doc = get_json(url, policy, hdrs)
        detected = detect(doc)
    except CatalogError as first:
        if first.code == "auth_failed" or registry_endpoint(url) == url:
            raise
        try:
            return registry(registry_endpoint(url))
        except CatalogError:
            raise first from None
    if detected == "official_registry":
        # The first page was read without the paging parameters; page properly from the start.
        return registry(url)
    return _document(doc, detected, prefer)


def _document(doc: Any, fmt: str, prefer: Prefer) -> FetchResult:
    parsed = parse_document(doc, fmt, prefer=prefer)
    return FetchResult(parsed.entries, parsed.errors, full=True, format=parsed.format, pages=1)


def registry_endpoint(url: str) -> str:
    """`https://host` → `https://host/v0.1/servers`; a URL already ending in `/servers` is kept."""
    parts = urlsplit(url)
    path = parts.path.rstrip("/")
    if path.endswith("/servers"):
        return url
    return urlunsplit(parts._replace(path=path + REGISTRY_PATH))


def with_params(url: str, params: Mapping[str, Any]) -> str:
    """`url` with `params` set in its query string (existing parameters such as `search=` kept)."""
    parts = urlsplit(url)
    query = {k: v for k, v in parse_qsl(parts.query, keep_blank_values=True) if k not in params}
    query.update({k: str(v) for k, v in params.items() if v is not None})
    return urlunsplit(parts._replace(query=urlencode(query)))


def get_json(url: str, policy: OutboundPolicy, headers: Mapping[str, str]) -> Any:
    """GET `url` through the guard and decode its JSON body, or raise a CatalogError saying why not."""
    sent = dict(headers)
    if not any(k.lower() == "accept" for k in sent):
        sent["Accept"] = "application/json"
    response = fetch("GET", url, policy=policy, headers=sent)
    check_status(response)
    return decode_json(response)


def check_status(response: FetchedResponse) -> None:
    if response.status in (401, 403):
        # Never echo the headers we sent: they are the source's secrets.
        raise CatalogError(
            f"authentication failed (HTTP {response.status}); check the source's auth headers",
            code=ApiCode.AUTH_FAILED,
        )
    if not 200 <= response.status < 300:
        raise CatalogError(f"{safe_url(response.url)} answered HTTP {response.status}", code=ApiCode.HTTP_ERROR)


def decode_json(response: FetchedResponse) -> Any:
    """Parse the body whatever its declared type (many servers send JSON as text/plain)."""
    try:
        return json.loads(response.content)
    except (ValueError, UnicodeDecodeError):
        pass
    excerpt = " ".join(response.text[:EXCERPT_CHARS * 2].split())[:EXCERPT_CHARS]
    kind = response.content_type or "no content type"
    shown = f": {excerpt!r}" if excerpt else " (empty body)"
    raise CatalogError(
        f"expected a JSON catalog from {safe_url(response.url)} but got {kind}{shown}", code=ApiCode.NOT_JSON
    )


def _timestamp(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        stamp = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)


def _fetch_registry(
    endpoint: str,
    policy: OutboundPolicy,
    headers: Mapping[str, str],
    cursor: str | None,
    updated_since: str | None,
    page_limit: int,
    max_pages: int,
    prefer: Prefer,
) -> FetchResult:
    started = datetime.now(UTC).isoformat().replace("+00:00", "Z")
    start_cursor = cursor
    incremental = updated_since is not None or cursor is not None
    out = VersionCollector()
    seen_cursors = {cursor} if cursor else set()
    newest: tuple[datetime, str] | None = None
    pages = 0
    while True:
        if pages >= max_pages:
            raise CatalogError(f"the registry listing has more than {max_pages} pages; stopped",
                               code=ApiCode.TOO_MANY_PAGES)
        params = {"limit": page_limit, "version": "latest", "cursor": cursor, "updated_since": updated_since}
        doc = get_json(with_params(endpoint, params), policy, headers)
        if not (isinstance(doc, dict) and isinstance(doc.get("servers"), list)):
            raise CatalogError(
                f'expected an MCP registry page {{"servers": [...]}} on page {pages + 1}; got {describe(doc)}'
            )
        page = parse_official_registry(doc, prefer=prefer)
        pages += 1
        out.errors += page.errors
        for name, failed_rank in page.failed_ranks.items():
            out.fail(name, failed_rank)  # a newer version that cannot be mapped is not replaced by an older one
        for entry in page.entries:
            rank = page.ranks.get(entry.name)
            if incremental and not_latest(rank):
                # A change to an older version (a registry ignoring version=latest sends it) must not
                # replace or remove the latest one, which this partial listing may not contain.
                continue
            # A registry ignoring version=latest spreads a server's versions over pages: keep the best.
            out.offer(entry, rank)
            stamp = _timestamp(entry.updated_at)
            if stamp and entry.updated_at and (newest is None or stamp > newest[0]):
                newest = (stamp, entry.updated_at)
        if not page.next_cursor:
            break
        if page.next_cursor in seen_cursors:
            raise CatalogError(
                f"cursor loop detected: page {pages} returned a nextCursor that was already followed",
                code=ApiCode.CURSOR_LOOP,
            )
        seen_cursors.add(page.next_cursor)
        cursor = page.next_cursor
    next_since = newest[1] if newest else (updated_since or started)
    return FetchResult(
        out.entries, out.errors,
        full=updated_since is None and start_cursor is None,
        next_updated_since=next_since, format="official_registry", pages=pages,
    )
