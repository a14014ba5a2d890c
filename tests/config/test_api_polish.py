"""API polish (issue 12): the root redirects to the admin, unknown API paths answer the JSON envelope,
(`GET /api/v1/` listing entry points is not wired yet)."""

from __future__ import annotations

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
