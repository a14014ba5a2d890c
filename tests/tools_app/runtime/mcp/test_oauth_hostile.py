"""The OAuth client against a hostile server: a resource naming another server, endless and trickling
answers, refused registration. Every request goes through the one outbound policy (core.outbound)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from core.outbound import OutboundPolicy
from tests.fixtures.hostile_oauth import Hostile, hostile_server
from tests.waiting import scaled
from tools_app.runtime.mcp import oauth

REDIRECT = "http://toolhub.test/oauth/callback/"
PRM_PATH = "/.well-known/oauth-protected-resource/mcp"


@pytest.fixture
def hostile() -> Iterator[Hostile]:
    with hostile_server() as state:
        yield state


def policy(**kwargs: Any) -> OutboundPolicy:
    return OutboundPolicy.build("127.0.0.1/32", **{"timeout_s": 10, **kwargs})


def test_its_own_resource_is_taken(hostile: Hostile) -> None:
    found = oauth.discover(hostile.url, policy())
    assert found.resource == hostile.url and found.issuer == hostile.base + "/"
    hostile.resource = hostile.url + "/"  # the same identifier, spelled with a trailing slash
    assert oauth.discover(hostile.url, policy()).resource == hostile.url + "/"


@pytest.mark.parametrize("claimed", ["http://127.0.0.1:1/mcp", "{base}/other", "{base}/mcp/deeper", "{base}"])
def test_a_resource_naming_another_server_is_refused(hostile: Hostile, claimed: str) -> None:
    """RFC 9728 §3.3: the resource must be the identifier the metadata was fetched for (here the tool's URL):
    another server's (a confused deputy: Toolhub would obtain a token for it), a sibling, a child path, or the
    bare origin when the path-aware document was the one served."""
    hostile.resource = claimed.format(base=hostile.base)
    with pytest.raises(oauth.ResourceMismatch) as refused:
        oauth.discover(hostile.url, policy())
    assert refused.value.code == "oauth_resource_mismatch"
    assert hostile.resource in refused.value.message and hostile.url in refused.value.message
    assert refused.value.details == {"resource": hostile.resource, "expected": hostile.url}


def test_an_endless_metadata_document_is_cut_at_the_cap(hostile: Hostile) -> None:
    hostile.metadata_mode = "huge"
    hostile.huge_bytes = 127 * 1024 * 1024
    with pytest.raises(oauth.OAuthFailed) as refused:
        oauth.discover(hostile.url, policy(max_bytes=1024 * 1024))
    assert refused.value.details["cause"] == "response_too_large", refused.value.details
    # Not read whole: the server got rid of little more than the cap (plus socket buffers) before the hang-up.
    assert hostile.sent[PRM_PATH] < 32 * 1024 * 1024, hostile.sent


def bounded(call: Callable[[], Any], within_s: float) -> BaseException | None:
    """Run `call` in a thread; the exception it raised, failing the test when it still runs after `within_s`."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            call()
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            outcome.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(within_s)
    assert not worker.is_alive(), f"still running after {within_s} s: no total deadline"
    return outcome[0]


def test_a_trickling_discovery_is_cut_at_the_total_deadline(hostile: Hostile) -> None:
    hostile.metadata_mode = "trickle"
    hostile.trickle_s = 0.5  # well inside the per-read timeout: only a total deadline ends it
    failure = bounded(lambda: oauth.discover(hostile.url, policy(timeout_s=2)), within_s=scaled(60))
    assert isinstance(failure, oauth.OAuthFailed) and failure.details["cause"] == "timeout", failure
    assert hostile.sent[PRM_PATH] < 10_000


def registered(hostile: Hostile, pol: OutboundPolicy) -> tuple[oauth.Discovery, oauth.Client]:
    found = oauth.discover(hostile.url, pol)
    return found, oauth.register(found, redirect_uri=REDIRECT, client_name="Toolhub", policy=pol)


@pytest.mark.parametrize("mode,cause", [("huge", "response_too_large"), ("trickle", "timeout")])
def test_token_requests_go_through_the_same_policy(hostile: Hostile, mode: str, cause: str) -> None:
    pol = policy(timeout_s=2, max_bytes=1024 * 1024)
    found, client = registered(hostile, pol)
    hostile.token_mode, hostile.trickle_s = mode, 0.5
    for step in (lambda: oauth.exchange_code(found, client, code="c", code_verifier="v" * 43, redirect_uri=REDIRECT,
                                             policy=pol),
                 lambda: oauth.refresh(found, client, refresh_token="rt", policy=pol)):
        failure = bounded(step, within_s=scaled(60))
        assert isinstance(failure, oauth.OAuthFailed) and failure.details["cause"] == cause, failure
        assert "hostile-client-secret" not in failure.message
    assert bounded(lambda: oauth.revoke(found, client, token="rt", hint="refresh_token", policy=pol),
                   within_s=scaled(60)) is None
    assert hostile.sent["/token"] < 32 * 1024 * 1024


def test_an_authorization_server_at_a_blocked_address_is_never_asked(hostile: Hostile) -> None:
    hostile.authorization_servers = ["http://169.254.169.254/"]
    with pytest.raises(oauth.OAuthFailed) as refused:
        oauth.discover(hostile.url, policy())
    assert refused.value.details["cause"] == "outbound_blocked"
    assert "169.254.169.254" in refused.value.message


def test_a_refused_registration_is_named(hostile: Hostile) -> None:
    hostile.register_status = 400
    found = oauth.discover(hostile.url, policy())
    with pytest.raises(oauth.OAuthFailed) as refused:
        oauth.register(found, redirect_uri=REDIRECT, client_name="Toolhub", policy=policy())
    assert "invalid_client_metadata" in refused.value.message
