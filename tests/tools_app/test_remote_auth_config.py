"""REMOTE config `auth`: oauth2 with a write-only, masked, scrubbed client secret; bad input named by field."""

from __future__ import annotations

from typing import Any

import pytest

from core.secrets import MASK
from tools_app.configs import mask_config, merge_masked, parse_config, secret_values, validate_config
from tools_app.errors import InvalidConfig

CLIENT_SECRET = "cs-must-never-be-shown-0123456789"
BASE = {"url": "https://mcp.example.com/mcp", "transport": "streamable_http"}


def test_auth_defaults_to_none_and_takes_oauth2() -> None:
    assert parse_config("REMOTE", BASE).auth.type == "none"  # type: ignore[attr-defined]
    stored = validate_config("REMOTE", {**BASE, "auth": {"type": "oauth2", "per_user": True, "scopes": ["read"],
                                                         "client_id": "abc", "client_secret": CLIENT_SECRET}})
    assert stored["auth"] == {"type": "oauth2", "per_user": True, "scopes": ["read"], "client_id": "abc",
                              "client_secret": CLIENT_SECRET}


def test_a_config_without_auth_is_stored_as_before_and_loads_typed() -> None:
    from tools_app.configs import load_config

    assert "auth" not in validate_config("REMOTE", BASE)
    stored = validate_config("REMOTE", {**BASE, "auth": {"type": "oauth2", "per_user": True}})
    loaded = load_config("REMOTE", stored)
    assert loaded.auth.type == "oauth2" and loaded.auth.per_user is True
    assert load_config("REMOTE", validate_config("REMOTE", BASE)).auth.type == "none"


def test_client_secret_is_masked_kept_and_scrubbed() -> None:
    stored = validate_config("REMOTE", {**BASE, "auth": {"type": "oauth2", "client_id": "abc",
                                                         "client_secret": CLIENT_SECRET}})
    shown = mask_config("REMOTE", stored)
    assert shown["auth"]["client_secret"] == MASK and shown["auth"]["client_id"] == "abc"
    assert CLIENT_SECRET not in str(shown)
    kept = merge_masked("REMOTE", stored=stored, incoming={**BASE, "auth": {"type": "oauth2", "client_id": "abc",
                                                                            "client_secret": MASK}})
    assert kept["auth"]["client_secret"] == CLIENT_SECRET
    assert CLIENT_SECRET in secret_values("REMOTE", stored)
    with pytest.raises(InvalidConfig) as nothing_stored:
        merge_masked("REMOTE", stored=BASE, incoming={**BASE, "auth": {"type": "oauth2", "client_secret": MASK}})
    assert nothing_stored.value.details["field"] == "config.auth.client_secret"


@pytest.mark.parametrize("auth,field", [
    ({"type": "basic"}, "auth.type"),
    ({"type": "oauth2", "extra": 1}, "auth.extra"),
    ({"type": "oauth2", "scopes": "read"}, "auth.scopes"),
    ({"type": "none", "client_secret": CLIENT_SECRET}, "auth"),
])
def test_bad_auth_is_named_without_its_value(auth: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidConfig) as refused:
        validate_config("REMOTE", {**BASE, "auth": auth})
    assert str(refused.value.details.get("field", "")).startswith(f"config.{field}")
    assert CLIENT_SECRET not in str(refused.value) and CLIENT_SECRET not in str(refused.value.details)
