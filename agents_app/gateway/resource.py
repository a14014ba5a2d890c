"""Each agent's protected resource (RFC 9728/8707): its URL, its metadata URL, and reading one back. Django-free."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

# The one scope Toolhub issues: list and call one agent's functions as the consenting member. Which agent is
# the token's RFC 8707 resource, never the scope.
SCOPE = "mcp"
SCOPE_DESCRIPTION = "List and call this agent's functions as you"

WELL_KNOWN = "/.well-known/oauth-protected-resource"
_AGENT_PATH = re.compile(r"/mcp/(?P<slug>[a-z0-9][a-z0-9-]{0,63})/agents/(?P<agent>[0-9]{1,18})/?$")


def agent_path(slug: str, agent_id: int | str) -> str:
    return f"/mcp/{slug}/agents/{agent_id}/"


def agent_resource(base: str, slug: str, agent_id: int | str) -> str:
    """The agent's gateway URL, which is its resource identifier (the `/sse` variant shares it)."""
    return base.rstrip("/") + agent_path(slug, agent_id)


def metadata_url(base: str, slug: str, agent_id: int | str) -> str:
    """Where the agent's protected resource metadata lives (named by a 401's WWW-Authenticate)."""
    return base.rstrip("/") + WELL_KNOWN + agent_path(slug, agent_id)


def parse_agent_resource(resource: str, base: str) -> tuple[str, str] | None:
    """(tenant slug, agent id) of an agent resource URL under `base`, else None (another site, another path,
    a query or fragment: a resource indicator names exactly one agent's URL)."""
    prefix = base.rstrip("/")
    if not prefix or not resource.startswith(prefix + "/"):
        return None
    parts = urlsplit(resource)
    if parts.query or parts.fragment or "#" in resource:
        return None
    found = _AGENT_PATH.fullmatch(resource[len(prefix):])
    if found is None:
        return None
    return found["slug"], found["agent"]


def bound_agent(resources: list[str]) -> tuple[str, str] | None:
    """(tenant slug, agent id) a token's resources bind it to, whatever site base it was issued under: one
    resource naming one agent's path. Issuance checks the base (parse_agent_resource); this reads it back."""
    if len(resources) != 1 or not isinstance(resources[0], str):
        return None
    parts = urlsplit(resources[0])
    if parts.query or parts.fragment or parts.scheme not in ("http", "https"):
        return None
    found = re.search(r"/mcp/(?P<slug>[a-z0-9][a-z0-9-]{0,63})/agents/(?P<agent>[0-9]{1,18})/?$", parts.path)
    return (found["slug"], found["agent"]) if found is not None else None
