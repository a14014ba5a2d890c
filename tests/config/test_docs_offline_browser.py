"""The API docs in headless Chromium fetch nothing from another host (they work offline)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser import MARKS, shot, signed_in_page
from tests.factories import UserFactory

pytestmark = MARKS


@pytest.mark.parametrize("path", ["/api/v1/redoc/", "/api/v1/docs/"])
def test_docs_fetch_nothing_from_another_host(live_server: Any, browser: Any, path: str) -> None:
    # Signed in by a session cookie (no login form loaded; the form has tests of its own): what is watched is the
    # docs page, from its first request on.
    page = signed_in_page(browser, live_server.url, UserFactory(username="doc", password="pw-docs-1", is_staff=True))
    foreign: list[str] = []

    def guard(route: Any) -> None:
        url = route.request.url
        if url.startswith(live_server.url) or url.startswith("data:") or url.startswith("blob:"):
            route.continue_()
        else:
            foreign.append(url)
            route.abort()

    page.route("**/*", guard)
    page.goto(f"{live_server.url}{path}")
    page.wait_for_load_state("networkidle")
    page.wait_for_timeout(1500)  # ReDoc renders its menu (and its footer logo) after the schema arrives
    shot(page, "api-docs-" + path.strip("/").split("/")[-1], full_page=False)
    assert foreign == []
