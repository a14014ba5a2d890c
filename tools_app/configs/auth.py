"""Whose account a tool reaches its server with, as its stored config says: the one place these reads live.

- `is_oauth_tool`: the tool signs in upstream with OAuth 2.1 (REMOTE `auth.type` `oauth2`).
- `is_per_user`: each member connects their own OAuth account (`auth.per_user`), not one shared account.
- `declared_keys`: the keys each member sets for themselves (`user_secrets`), in the config's order.
- `acts_as_user`: the tool reaches its server as each calling member (either of the last two).

Each takes the tool (anything with the stored `config` mapping, e.g. a `tools_app.models.Tool`): a config saved
through the typed specs, so the reads trust its shape but never fail on a missing key. A config on no tool (one the
market builds before it creates the tool, or a tool's previous config) is read as `Draft(config)`. Django-free.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol


class Configured(Protocol):
    """A tool as these accessors read it: its stored (validated) config."""

    @property
    def config(self) -> Any: ...


@dataclass(frozen=True)
class Draft:
    """A config on no tool, for these accessors: `is_oauth_tool(Draft(config))`."""

    config: Mapping[str, Any] | None


def _config(tool: Configured) -> Mapping[str, Any]:
    config = tool.config
    return config if isinstance(config, Mapping) else {}


def _auth(tool: Configured) -> Mapping[str, Any]:
    auth = _config(tool).get("auth")
    return auth if isinstance(auth, Mapping) else {}


def is_oauth_tool(tool: Configured) -> bool:
    """The tool signs in to its server with OAuth 2.1 (a shared or a per-member connection)."""
    return _auth(tool).get("type") == "oauth2"


def is_per_user(tool: Configured) -> bool:
    """An OAuth tool each member connects their own account to (False: one shared account, or not OAuth)."""
    return is_oauth_tool(tool) and bool(_auth(tool).get("per_user"))


def declared_keys(tool: Configured) -> list[str]:
    """The keys each member sets for themselves (`user_secrets`: environment variables or header names)."""
    keys = _config(tool).get("user_secrets") or []
    return [str(key) for key in keys] if isinstance(keys, list | tuple) else []


def acts_as_user(tool: Configured) -> bool:
    """The tool reaches its server as each calling member (their keys or their OAuth account), not as one account."""
    return is_per_user(tool) or bool(declared_keys(tool))


__all__ = ["Configured", "Draft", "acts_as_user", "declared_keys", "is_oauth_tool", "is_per_user"]
