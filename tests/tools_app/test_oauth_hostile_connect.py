"""Connecting an OAuth tool to a hostile server: every failure is a typed 4xx naming the step, never a 500, and
Django's debug page (DEBUG, `make run`) shows none of the tool's secrets."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tenants_app.models import Role
from tests.fixtures.hostile_oauth import Hostile, hostile_server
from tests.waiting import PROCESS_BOUND_S
from tools_app.models import OAuthFlow, OAuthRegistration

pytestmark = pytest.mark.django_db(transaction=True)
HEADER_SECRET = "hdr-4f1c9a77e2b84d0f"
CLIENT_SECRET = "cs-9b2e61d0c3a54f7e"


@pytest.fixture
def hostile() -> Iterator[Hostile]:
    with hostile_server() as state:
        yield state


def oauth_tool(api: Any, url: str, **auth: Any) -> int:
    resp = api.post("/api/v1/tools/", {"name": "hostile", "type": "REMOTE", "config": {
        "url": url, "headers": {"X-Api-Key": HEADER_SECRET}, "auth": {"type": "oauth2", **auth}}}, format="json")
    assert resp.status_code == 201, resp.content
    return int(resp.json()["id"])


def connect(client: Any, tool_id: int) -> Any:
    return client.post(f"/api/v1/tools/{tool_id}/oauth/connect/")


def test_a_resource_naming_another_server_is_refused_naming_both(api: Any, hostile: Hostile) -> None:
    hostile.resource = "http://127.0.0.1:1/mcp"
    tool_id = oauth_tool(api, hostile.url)
    resp = connect(api, tool_id)
    assert resp.status_code == 400, resp.content
    error = resp.json()["error"]
    assert error["code"] == "oauth_resource_mismatch"
    assert hostile.resource in error["message"] and hostile.url in error["message"]
    assert error["details"] == {"resource": hostile.resource, "expected": hostile.url}
    assert not OAuthFlow.objects.exists() and not OAuthRegistration.objects.exists()
    assert hostile.hits["/register"] == 0  # nothing was registered at a server that named another resource


@pytest.mark.parametrize("hostility,code,cause", [
    ({"authorization_servers": ["http://169.254.169.254/"]}, "oauth_failed", "outbound_blocked"),
    ({"register_status": 400}, "oauth_failed", None),
    ({"metadata_mode": "huge"}, "oauth_failed", "response_too_large"),
])
def test_connect_failures_are_typed_not_500(api: Any, member_client: Any, tenant: Any, hostile: Hostile,
                                            settings: Any, hostility: dict[str, Any], code: str,
                                            cause: str | None) -> None:
    settings.TOOLHUB_OUTBOUND_MAX_BYTES = 1024 * 1024
    for name, value in hostility.items():
        setattr(hostile, name, value)
    tool_id = oauth_tool(api, hostile.url, per_user=True)
    member = member_client(tenant, Role.MEMBER)  # a plain member connects their own account
    resp = connect(member, tool_id)
    assert resp.status_code == 400, resp.content
    error = resp.json()["error"]
    assert error["code"] == code and error["message"].startswith("connecting 'hostile' failed: "), error
    assert error["details"].get("cause") == cause, error
    assert HEADER_SECRET not in resp.content.decode() and "hostile-client-secret" not in resp.content.decode()
    assert not OAuthFlow.objects.exists()


def test_a_trickling_server_is_cut_at_the_configured_deadline(api: Any, hostile: Hostile, settings: Any) -> None:
    settings.TOOLHUB_OUTBOUND_TIMEOUT_S = 5
    hostile.metadata_mode, hostile.trickle_s = "trickle", 2  # a byte every 2 s: each read is quick enough
    tool_id = oauth_tool(api, hostile.url)
    answers: list[Any] = []
    worker = threading.Thread(target=lambda: answers.append(connect(api, tool_id)), daemon=True)
    worker.start()
    worker.join(PROCESS_BOUND_S)
    # Cut (the whole document would take 20,000 s), and by the deadline: the cause says so.
    assert not worker.is_alive(), "the connect request was never cut"
    assert answers[0].status_code == 400 and answers[0].json()["error"]["details"]["cause"] == "timeout"


def test_the_debug_page_of_a_failing_connect_shows_no_secret(member_client: Any, tenant: Any, api: Any,
                                                            hostile: Hostile, settings: Any,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Under DEBUG a bug in connect (here: building the authorize link blows up after the client secret and the
    tool's headers were decrypted into local variables) renders Django's technical 500 page: none of them on it."""
    tool_id = oauth_tool(api, hostile.url, per_user=True, client_id="configured-client", client_secret=CLIENT_SECRET)
    member = member_client(tenant, Role.MEMBER)
    settings.DEBUG = True
    member.raise_request_exception = False
    assert connect(member, tool_id).status_code == 200  # a configured client: connecting works

    from tools_app.runtime.mcp import oauth

    def boom(*args: Any, **kwargs: Any) -> str:
        raise ValueError("a bug")

    monkeypatch.setattr(oauth, "authorize_url", boom)
    page = connect(member, tool_id)
    assert page.status_code == 500
    text = page.content.decode()
    assert "ValueError" in text and "Traceback" in text  # it is the debug page
    for secret in (HEADER_SECRET, CLIENT_SECRET):
        assert secret not in text
    # The member's connections page (HTML, a form POST) under DEBUG too.
    from django.test import Client

    browser = Client(raise_request_exception=False)
    browser.force_login(member.user)
    html = browser.post(f"/connections/?tenant={tenant.slug}", {"action": "connect", "tool": tool_id})
    assert html.status_code == 500
    for secret in (HEADER_SECRET, CLIENT_SECRET):
        assert secret not in html.content.decode()


@pytest.mark.parametrize("token_mode", ["huge", "trickle"])
def test_a_callback_whose_code_exchange_fails_upstream_is_a_typed_page(api: Any, hostile: Hostile, settings: Any,
                                                                       token_mode: str) -> None:
    from urllib.parse import parse_qs, urlparse

    from django.test import Client

    settings.TOOLHUB_OUTBOUND_MAX_BYTES, settings.TOOLHUB_OUTBOUND_TIMEOUT_S = 1024 * 1024, 3
    tool_id = oauth_tool(api, hostile.url)
    link = connect(api, tool_id).json()["authorize_url"]
    browser = Client(raise_request_exception=False)
    browser.force_login(api.user)
    started = browser.get(urlparse(link).path)
    assert started.status_code == 302 and started["Location"].startswith(hostile.base + "/authorize?")
    state = parse_qs(urlparse(started["Location"]).query)["state"][0]
    hostile.token_mode, hostile.trickle_s = token_mode, 0.5
    done = browser.get("/oauth/callback/", {"state": state, "code": "code-from-provider"}, follow=True)
    assert done.status_code == 400, done.content.decode()[:300]
    page = done.content.decode()
    assert "Not connected" in page and "the code exchange" in page
    assert "hostile-client-secret" not in page and "code-from-provider" not in page
