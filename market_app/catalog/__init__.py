"""Django-free market catalogs: types, format parsers and the fetcher (through the outbound guard)."""

from pathlib import Path

from market_app.catalog.common import looks_secret, suggest_tool_name
from market_app.catalog.fetch import FetchResult, fetch_catalog, registry_endpoint
from market_app.catalog.parsers import (
    detect,
    parse_document,
    parse_list,
    parse_mcp_servers,
    parse_official_registry,
)
from market_app.catalog.shell import is_shell_command
from market_app.catalog.types import (
    FORMATS,
    CatalogError,
    EntryData,
    EntryError,
    ParseResult,
    RequiredVar,
    content_hash,
)

DEMO_CATALOG_PATH = Path(__file__).with_name("demo_catalog.json")

__all__ = [
    "DEMO_CATALOG_PATH",
    "FORMATS",
    "CatalogError",
    "EntryData",
    "EntryError",
    "FetchResult",
    "ParseResult",
    "RequiredVar",
    "content_hash",
    "detect",
    "fetch_catalog",
    "is_shell_command",
    "looks_secret",
    "parse_document",
    "parse_list",
    "parse_mcp_servers",
    "parse_official_registry",
    "registry_endpoint",
    "suggest_tool_name",
]
