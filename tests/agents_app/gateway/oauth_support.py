"""A scripted browser for Toolhub's sign-in and consent pages, in-memory token storage for the mcp SDK's
OAuthClientProvider, and raw authorization-code helpers for the refusals the SDK never sends."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import html
import re
import secrets
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlencode, urljoin, urlsplit

import httpx2

from tests import loopback
from tests.waiting import scaled

if TYPE_CHECKING:  # the SDK at run time only in `provider()`: consent_browser.py, a process of its own, needs none of
    # it (the SDK's import is ~1 s of CPU per start)
    from mcp.client.auth import OAuthClientProvider
    from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

REDIRECT_URI = "http://127.0.0.1:33418/callback"
CLIENT_NAME = "Test Desktop Client"
_HIDDEN = re.compile(r'<input type="hidden" name="(?P<name>[^"]+)" value="(?P<value>[^"]*)"')


@dataclass
class MemoryStorage:
    """The SDK's TokenStorage, kept in memory so the test can read the tokens it was issued."""

    tokens: OAuthToken | None = None
    client_info: OAuthClientInformationFull | None = None
    issued: list[OAuthToken] = field(default_factory=list)

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens
        self.issued.append(tokens)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


def hidden_fields(page: str) -> dict[str, str]:
    return {m["name"]: html.unescape(m["value"]) for m in _HIDDEN.finditer(page)}


class Browser:
    """A person at a browser: signs in at /accounts/login/ when sent there, then allows or denies on the
    consent page. Never follows the final redirect to the client: its Location is the answer."""

    def __init__(self, username: str, password: str = "pw", *, allow: bool = True) -> None:
        self.username, self.password, self.allow = username, password, allow
        self.http = loopback.async_client(timeout=scaled(30))
        self.consent_pages: list[str] = []

    async def close(self) -> None:
        await self.http.aclose()

    async def _get(self, url: str) -> httpx2.Response:
        """GET, following redirects inside Toolhub and signing in when the login page asks."""
        for _ in range(6):
            resp = await self.http.get(url)
            if resp.status_code not in (301, 302, 303):
                return resp
            target = urljoin(url, resp.headers["location"])
            if urlsplit(target).path == "/accounts/login/":
                url = await self._sign_in(target)
            elif urlsplit(target).netloc != urlsplit(url).netloc:
                return resp  # to the client: the caller reads the Location
            else:
                url = target
        raise AssertionError("too many redirects")

    async def _sign_in(self, login_url: str) -> str:
        page = await self.http.get(login_url)
        fields = hidden_fields(page.text)
        form = {"csrfmiddlewaretoken": fields["csrfmiddlewaretoken"], "username": self.username,
                "password": self.password, "next": fields.get("next", "")}
        done = await self.http.post(login_url, data=form, headers={"Referer": login_url})
        assert done.status_code == 302, f"sign-in failed ({done.status_code})"
        return urljoin(login_url, done.headers["location"])

    async def consent(self, authorize_url: str) -> httpx2.Response:
        """Open the authorize URL; answer the consent page when there is one. The response is the redirect back
        to the client (302), or the page Toolhub answered instead (an error or a refusal)."""
        page = await self._get(authorize_url)
        if page.status_code != 200 or 'id="authorizationForm"' not in page.text:
            return page
        self.consent_pages.append(page.text)
        form = hidden_fields(page.text)
        if self.allow:
            form["allow"] = "Allow"
        return await self.http.post(str(page.url), data=form, headers={"Referer": str(page.url)})


def redirect_params(resp: httpx2.Response) -> dict[str, str]:
    assert resp.status_code == 302, f"expected a redirect to the client, got {resp.status_code}: {resp.text[:300]}"
    location = resp.headers["location"]
    assert location.startswith(REDIRECT_URI), location
    return {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}


def provider(server_url: str, browser: Browser, storage: MemoryStorage | None = None, *,
             client_metadata_url: str | None = None) -> OAuthClientProvider:
    """The SDK's OAuth client for `server_url`, its person being `browser` (identified by a client ID metadata
    document at `client_metadata_url` when given, else registering itself)."""
    from mcp.client.auth import OAuthClientProvider
    from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata

    pending: list[str] = []

    async def redirect_handler(url: str) -> None:
        pending.append(url)

    async def callback_handler() -> AuthorizationCodeResult:
        params = redirect_params(await browser.consent(pending.pop()))
        return AuthorizationCodeResult(code=params["code"], state=params.get("state"), iss=params.get("iss"))

    metadata = OAuthClientMetadata(client_name=CLIENT_NAME, redirect_uris=[REDIRECT_URI],  # type: ignore[list-item]
                                   grant_types=["authorization_code", "refresh_token"], response_types=["code"])
    return OAuthClientProvider(server_url=server_url, client_metadata=metadata, storage=storage or MemoryStorage(),
                               redirect_handler=redirect_handler, callback_handler=callback_handler,
                               client_metadata_url=client_metadata_url)


# --- raw requests, for what the SDK would never send ----------------------------------------------


def register(base_url: str, redirect_uris: list[str] | None = None, **extra: Any) -> httpx2.Response:
    body = {"client_name": CLIENT_NAME, "redirect_uris": redirect_uris or [REDIRECT_URI], **extra}
    return loopback.post(f"{base_url}/oauth/register/", json=body)


@dataclass
class Pkce:
    verifier: str
    challenge: str

    @classmethod
    def make(cls) -> Pkce:
        verifier = secrets.token_urlsafe(48)
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
        return cls(verifier, challenge)


def authorize_url(base_url: str, client_id: str, resource: str, pkce: Pkce, *, method: str = "S256",
                  redirect_uri: str = REDIRECT_URI, state: str = "st-1") -> str:
    query = {"response_type": "code", "client_id": client_id, "redirect_uri": redirect_uri, "state": state,
             "code_challenge": pkce.challenge if method == "S256" else pkce.verifier,
             "code_challenge_method": method, "resource": resource, "scope": "mcp"}
    return f"{base_url}/oauth/authorize/?{urlencode(query)}"


def exchange(base_url: str, client_id: str, code: str, pkce: Pkce, resource: str | None = None) -> httpx2.Response:
    data = {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT_URI, "client_id": client_id,
            "code_verifier": pkce.verifier}
    if resource:
        data["resource"] = resource
    return loopback.post(f"{base_url}/oauth/token/", data=data)


def registered_client(base_url: str) -> str:
    resp = register(base_url)
    assert resp.status_code == 201, resp.text
    body = resp.json()
    assert body["token_endpoint_auth_method"] == "none" and "client_secret" not in body
    return str(body["client_id"])


def consent_as(url: str, username: str, *, allow: bool = True, tamper: dict[str, str] | None = None
               ) -> tuple[httpx2.Response, Browser]:
    """A fresh browser signed in as `username` answers the consent page at `url` (`tamper`: form fields replaced
    before allowing)."""
    browser = Browser(username, allow=allow)

    async def go() -> httpx2.Response:
        try:
            if tamper is None:
                return await browser.consent(url)
            page = await browser._get(url)
            form = {**hidden_fields(page.text), "allow": "Allow", **tamper}
            return await browser.http.post(str(page.url), data=form, headers={"Referer": str(page.url)})
        finally:
            await browser.close()

    return asyncio.run(go()), browser


def code_for(served: Any, setup: Any, username: str | None = None) -> tuple[str, str, Pkce, str]:
    """A registered client's id, setup's agent URL (the resource), the PKCE pair and the code the member's consent
    gave (`served` a running Toolhub)."""
    client_id = registered_client(served.base_url)
    pkce = Pkce.make()
    resource = served.endpoint("acme", setup.agent_id)
    resp, _ = consent_as(authorize_url(served.base_url, client_id, resource, pkce), username or setup.api.user.username)
    return client_id, resource, pkce, redirect_params(resp)["code"]


def tokens_for(served: Any, setup: Any, username: str | None = None) -> tuple[str, dict[str, Any]]:
    """A client id and the token response of a full code flow for setup's agent (`served` a running Toolhub)."""
    client_id, resource, pkce, code = code_for(served, setup, username)
    issued = exchange(served.base_url, client_id, code, pkce, resource)
    assert issued.status_code == 200, issued.text
    return client_id, issued.json()
