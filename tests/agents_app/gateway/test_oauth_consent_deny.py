"""The consent page's Deny checks the redirect_uri exactly as Allow does: a form whose redirect_uri was edited
to an unregistered one is never sent there, whichever button was pressed."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx2
import pytest

from tests.agents_app.gateway.oauth_support import (
    REDIRECT_URI,
    Browser,
    Pkce,
    authorize_url,
    hidden_fields,
    redirect_params,
    registered_client,
)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def setup(setup_undiscovered: Any) -> Any:
    """What these tests check is decided before any tool runs (OAuth pages, grants, initialize): the inventory tool
    is not discovered (a start of its SDK-built server, ~1.4 s of CPU, per test saved)."""
    return setup_undiscovered


def answer(url: str, username: str, *, allow: bool, redirect_uri: str | None = None) -> httpx2.Response:
    """Open the consent page at `url`, edit its redirect_uri field (when given) and press Allow or Deny."""
    browser = Browser(username)

    async def go() -> httpx2.Response:
        try:
            page = await browser._get(url)
            assert page.status_code == 200 and 'id="authorizationForm"' in page.text, page.text[:300]
            form = hidden_fields(page.text)
            if redirect_uri is not None:
                form["redirect_uri"] = redirect_uri
            if allow:
                form["allow"] = "Allow"
            return await browser.http.post(str(page.url), data=form, headers={"Referer": str(page.url)})
        finally:
            await browser.close()

    return asyncio.run(go())


@pytest.mark.parametrize("allow", [True, False], ids=["allow", "deny"])
@pytest.mark.parametrize("edited", ["https://evil.example/cb", "http://127.0.0.1:33418/other",
                                    "http://127.0.0.1:33418/callback?x=1"])
def test_an_edited_redirect_uri_is_refused_by_allow_and_deny(served: Any, setup: Any, allow: bool,
                                                             edited: str) -> None:
    client_id = registered_client(served.base_url)
    url = authorize_url(served.base_url, client_id, served.endpoint("acme", setup.agent_id), Pkce.make())
    resp = answer(url, setup.api.user.username, allow=allow, redirect_uri=edited)
    assert resp.status_code == 400, (resp.status_code, resp.headers.get("location"))
    assert "location" not in resp.headers
    assert "redirect" in resp.text.lower()


def test_deny_with_the_registered_redirect_still_answers_access_denied(served: Any, setup: Any) -> None:
    client_id = registered_client(served.base_url)
    url = authorize_url(served.base_url, client_id, served.endpoint("acme", setup.agent_id), Pkce.make())
    params = redirect_params(answer(url, setup.api.user.username, allow=False))
    assert params["error"] == "access_denied" and params["state"] == "st-1"
    # A loopback client's ephemeral port (RFC 8252 §7.3) is its registered redirect, for Deny as for Allow.
    moved = REDIRECT_URI.replace("33418", "40001")
    url = authorize_url(served.base_url, client_id, served.endpoint("acme", setup.agent_id), Pkce.make(),
                        redirect_uri=moved)
    resp = answer(url, setup.api.user.username, allow=False)
    assert resp.status_code == 302 and resp.headers["location"].startswith(moved + "?error=access_denied")
