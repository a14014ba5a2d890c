"""OAuth 2.1 client for REMOTE MCP servers: discovery, registration, authorize links, code exchange, refresh.

Django-free. The protocol pieces (discovery URL order, metadata and token models, PKCE, registration
requests) are the mcp SDK's (`mcp.client.auth`); this module only strings them into the steps a server-side
client with a browser redirect needs. Every request (discovery, registration, token, refresh, revocation) goes
through the one outbound policy (`core.outbound.fetch`: checked addresses, redirects re-checked, the size cap), and
each step as a whole runs under the policy's total deadline. Nothing raised here carries a token, a code or a client
secret: errors name the endpoint and the OAuth error code only.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote, urlencode, urlsplit

import httpx2
from pydantic import BaseModel, ValidationError

from core.codes import ApiCode, ResultCode
from core.outbound import FetchedResponse, OutboundPolicy, deadline, fetch, safe_url
from tools_app.runtime.errors import RuntimeToolError

# The SDK's pieces are imported inside the functions that use them: importing any of `mcp` imports all of it (its
# client and server, starlette, uvicorn: ~1 s of CPU), and the connection services import this module, so every
# Django process's start would pay for it (issue 35), though few of them ever speak OAuth.
if TYPE_CHECKING:
    from mcp.shared.auth import OAuthMetadata

M = TypeVar("M", bound=BaseModel)
INITIALIZE_PROBE = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
                    "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                               "clientInfo": {"name": "toolhub-oauth-probe", "version": "1"}}}


class OAuthFailed(RuntimeToolError):
    """Discovery, registration or a token request failed; the message names the step, never a secret."""

    code = ApiCode.OAUTH_FAILED


class ResourceMismatch(OAuthFailed):
    """The protected resource metadata names another resource than the one it was fetched for (RFC 9728 §3.3):
    a token for it could be spent at another server (a confused deputy). Details: `resource`, `expected`."""

    code = ApiCode.OAUTH_RESOURCE_MISMATCH


class GrantInvalid(OAuthFailed):
    """The authorization server refused the grant (`invalid_grant`): the user must authorize again."""

    code = ApiCode.AUTHORIZATION_REQUIRED
    result_code = ResultCode.AUTHORIZATION_REQUIRED


@dataclass(frozen=True)
class Discovery:
    """Where a protected MCP server's authorization happens."""

    resource: str
    issuer: str
    metadata: dict[str, Any]
    scopes_supported: list[str] = field(default_factory=list)

    @property
    def server(self) -> OAuthMetadata:
        from mcp.shared.auth import OAuthMetadata  # the SDK on first use (see the imports)

        return OAuthMetadata.model_validate(self.metadata)


@dataclass(frozen=True)
class Client:
    """A registered (or configured) OAuth client at one authorization server."""

    client_id: str
    client_secret: str = ""
    auth_method: str = "none"


@dataclass(frozen=True)
class Tokens:
    access_token: str
    refresh_token: str
    expires_at: float | None
    scope: str


@contextmanager
def _step(what: str, url: str, policy: OutboundPolicy) -> Iterator[None]:
    """One OAuth step as a whole within the policy's total deadline; a guard refusal (address, size, time) is an
    OAuthFailed naming the step, its cause (`details.cause`: the guard's code) and the guard's own words."""
    try:
        with deadline(policy.timeout_s):
            yield
    except OAuthFailed:
        raise
    except RuntimeToolError as exc:
        raise OAuthFailed(f"{what} at {safe_url(url)} failed: {exc.message}",
                          details={**exc.details, "cause": str(exc.code)}) from None


def _get(url: str, policy: OutboundPolicy) -> FetchedResponse:
    return fetch("GET", url, policy=policy, headers={"Accept": "application/json"})


def _probe(server_url: str, policy: OutboundPolicy) -> FetchedResponse:
    return fetch("POST", server_url, policy=policy, json=INITIALIZE_PROBE,
                 headers={"Accept": "application/json, text/event-stream"})


def _www_auth_hint(answer: FetchedResponse) -> str | None:
    """The RFC 9728 resource metadata URL a 401 names (the SDK's parser, given the answer's headers)."""
    if answer.status != 401:
        return None
    # the SDK on first use (see the imports)
    from mcp.client.auth.utils import extract_resource_metadata_from_www_auth

    return extract_resource_metadata_from_www_auth(httpx2.Response(401, headers=answer.headers))


def discover(server_url: str, policy: OutboundPolicy) -> Discovery:
    """RFC 9728 from the server's 401 (or the well-known fallbacks), then RFC 8414 / OIDC metadata."""
    with _step("OAuth discovery", server_url, policy):
        return _discover(server_url, policy)


def _first_document(policy: OutboundPolicy, urls: Iterable[str], model: type[M]) -> tuple[M, str] | None:
    """The first of `urls` that answers 200 with a valid `model` document, and the URL it came from."""
    for url in urls:
        answer = _get(url, policy)
        if answer.status == 200:
            try:
                return model.model_validate_json(answer.content), url
            except ValidationError:
                continue
    return None


def asks_for_oauth(server_url: str, policy: OutboundPolicy) -> bool:
    """Whether the server answers an unauthenticated `initialize` with 401 and a Bearer challenge naming its
    protected resource metadata (RFC 9728): it wants OAuth sign-in, not a static header. False when it cannot be
    reached or answers anything else."""
    try:
        with deadline(policy.timeout_s):
            return _www_auth_hint(_probe(server_url, policy)) is not None
    except RuntimeToolError:
        return False


WELL_KNOWN_PRM = "/.well-known/oauth-protected-resource"


def _same_resource(a: str, b: str) -> bool:
    """One resource identifier (RFC 8707: scheme and host compared without case, no fragment, a trailing slash
    of the path not significant)."""
    from mcp.shared.auth_utils import resource_url_from_server_url  # the SDK on first use (see the imports)

    return resource_url_from_server_url(a).rstrip("/") == resource_url_from_server_url(b).rstrip("/")


def expected_resource(server_url: str, metadata_url: str) -> str:
    """The resource identifier a protected resource metadata document fetched from `metadata_url` must name
    (RFC 9728 §3.3): the one the well-known suffix was inserted into, or, for a document named by the server's
    own 401, the server's URL."""
    parts = urlsplit(metadata_url)
    if parts.path == WELL_KNOWN_PRM or parts.path.startswith(WELL_KNOWN_PRM + "/"):
        return f"{parts.scheme}://{parts.netloc}{parts.path.removeprefix(WELL_KNOWN_PRM)}"
    return server_url


def check_resource(server_url: str, claimed: str, metadata_url: str) -> None:
    """Refuse a `resource` that is not the tool's own (RFC 9728 §3.3): it must be the identifier the metadata was
    fetched for, and that identifier the tool's URL or (the origin-wide fallback document) a parent of it."""
    from mcp.shared.auth_utils import check_resource_allowed  # the SDK on first use (see the imports)

    expected = expected_resource(server_url, metadata_url)
    if _same_resource(claimed, expected) and (
            _same_resource(expected, server_url)
            or check_resource_allowed(requested_resource=server_url, configured_resource=expected)):
        return
    raise ResourceMismatch(
        f"the protected resource metadata of {safe_url(server_url)} names the resource {safe_url(claimed)}, not "
        f"{safe_url(expected)}: a token for it could be used at another server, so Toolhub does not ask for one",
        details={"resource": claimed, "expected": expected})


def _discover(server_url: str, policy: OutboundPolicy) -> Discovery:
    # the SDK on first use (see the imports)
    from mcp.client.auth.utils import (
        build_oauth_authorization_server_metadata_discovery_urls,
        build_protected_resource_metadata_discovery_urls,
        validate_metadata_issuer,
    )
    from mcp.shared.auth import OAuthMetadata, ProtectedResourceMetadata
    from mcp.shared.auth_utils import resource_url_from_server_url

    probe = _probe(server_url, policy)
    hinted = _www_auth_hint(probe)
    found = _first_document(policy, build_protected_resource_metadata_discovery_urls(hinted, server_url),
                            ProtectedResourceMetadata)
    prm = found[0] if found else None
    if found is None and probe.status != 401:
        raise OAuthFailed(f"{safe_url(server_url)} does not ask for OAuth (HTTP {probe.status}, "
                          "no protected resource metadata)")
    if found is not None:
        check_resource(server_url, str(found[0].resource), found[1])
    as_url = str(prm.authorization_servers[0]) if prm and prm.authorization_servers else None
    documents = _first_document(policy, build_oauth_authorization_server_metadata_discovery_urls(as_url, server_url),
                                OAuthMetadata)
    if documents is None:
        raise OAuthFailed(f"no authorization server metadata found for {safe_url(server_url)}")
    metadata = documents[0]
    if as_url:
        try:
            validate_metadata_issuer(metadata, as_url.rstrip("/") if not str(metadata.issuer).endswith("/") else as_url)
        except Exception:  # noqa: BLE001 - whatever the SDK raises, the issuer did not match
            raise OAuthFailed(f"authorization server metadata of {safe_url(as_url)} names another issuer") from None
    if "S256" not in (metadata.code_challenge_methods_supported or ["S256"]):
        raise OAuthFailed(f"authorization server {safe_url(str(metadata.issuer))} does not offer PKCE S256")
    resource = str(prm.resource) if prm else resource_url_from_server_url(server_url)
    scopes = list(prm.scopes_supported or []) if prm else list(metadata.scopes_supported or [])
    return Discovery(resource=resource, issuer=str(metadata.issuer),
                     metadata=metadata.model_dump(mode="json", exclude_none=True), scopes_supported=scopes)


def register(discovery: Discovery, *, redirect_uri: str, client_name: str, policy: OutboundPolicy) -> Client:
    """Dynamic Client Registration (RFC 7591) of Toolhub's callback at this authorization server."""
    # the SDK on first use (see the imports)
    from mcp.client.auth.oauth2 import check_registration_usable
    from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata

    endpoint = discovery.server.registration_endpoint
    if endpoint is None:
        raise OAuthFailed(f"{safe_url(discovery.issuer)} offers no client registration: configure a client_id")
    request = OAuthClientMetadata(
        redirect_uris=[redirect_uri],  # type: ignore[list-item]
        client_name=client_name, grant_types=["authorization_code", "refresh_token"], response_types=["code"],
        token_endpoint_auth_method=_preferred_method(discovery.server),
    )
    with _step("client registration", str(endpoint), policy):
        answer = fetch("POST", str(endpoint), policy=policy, headers={"Accept": "application/json"},
                       json=request.model_dump(by_alias=True, mode="json", exclude_none=True))
    if answer.status not in (200, 201):
        raise OAuthFailed(f"client registration at {safe_url(str(endpoint))} failed: {_oauth_error(answer)}")
    try:
        info = OAuthClientInformationFull.model_validate_json(answer.content)
        check_registration_usable(info)
    except (ValidationError, Exception):  # noqa: BLE001 - any failure to read it is an unusable registration
        raise OAuthFailed(f"client registration at {safe_url(str(endpoint))} answered an unusable client") from None
    if not info.client_id:
        raise OAuthFailed(f"client registration at {safe_url(str(endpoint))} answered no client_id")
    return Client(client_id=info.client_id, client_secret=info.client_secret or "",
                  auth_method=info.token_endpoint_auth_method or ("client_secret_post" if info.client_secret else "none"))


def uses_client_metadata_document(discovery: Discovery, document_url: str) -> bool:
    """The authorization server takes a Client ID Metadata Document (MCP 2025-11-25) and Toolhub has an https URL
    to serve one at: the URL is the client id, no registration is made."""
    return document_url.startswith("https://") and discovery.server.client_id_metadata_document_supported is True


def client_metadata_document(document_url: str, *, redirect_uri: str, client_name: str, client_uri: str) -> dict[str, Any]:
    """The document served at `document_url` (the client id itself): a public client with one exact redirect."""
    from mcp.shared.auth import OAuthClientMetadata  # the SDK on first use (see the imports)

    document = OAuthClientMetadata(
        redirect_uris=[redirect_uri],  # type: ignore[list-item]
        client_name=client_name, client_uri=client_uri,  # type: ignore[arg-type]
        grant_types=["authorization_code", "refresh_token"], response_types=["code"],
        token_endpoint_auth_method="none", application_type="web",  # a server-side redirect, not a native app
    ).model_dump(by_alias=True, mode="json", exclude_none=True)
    return {"client_id": document_url, **document}


def _preferred_method(metadata: OAuthMetadata) -> Any:
    offered = metadata.token_endpoint_auth_methods_supported or ["client_secret_basic"]
    for method in ("none", "client_secret_post", "client_secret_basic"):
        if method in offered:
            return method
    return "client_secret_post"


def configured_client(discovery: Discovery, client_id: str, client_secret: str) -> Client:
    """A client an admin registered by hand; the secret goes by the method the server offers."""
    if not client_secret:
        return Client(client_id=client_id)
    offered = discovery.server.token_endpoint_auth_methods_supported or ["client_secret_basic"]
    method = "client_secret_post" if "client_secret_post" in offered else "client_secret_basic"
    return Client(client_id=client_id, client_secret=client_secret, auth_method=method)


def new_pkce() -> tuple[str, str]:
    """(verifier, S256 challenge)."""
    from mcp.client.auth.oauth2 import PKCEParameters  # the SDK on first use (see the imports)

    pkce = PKCEParameters.generate()
    return pkce.code_verifier, pkce.code_challenge


def authorize_url(discovery: Discovery, client: Client, *, redirect_uri: str, state: str, code_challenge: str,
                  scopes: list[str]) -> str:
    params = {"response_type": "code", "client_id": client.client_id, "redirect_uri": redirect_uri, "state": state,
              "code_challenge": code_challenge, "code_challenge_method": "S256", "resource": discovery.resource}
    if scopes:
        params["scope"] = " ".join(scopes)
    return f"{discovery.server.authorization_endpoint}?{urlencode(params)}"


def _client_auth(client: Client, data: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """(form, headers) with the client's credentials by its method (RFC 6749 §2.3.1: Basic, or in the form)."""
    data = {**data, "client_id": client.client_id}
    headers = {"Accept": "application/json", "Content-Type": "application/x-www-form-urlencoded"}
    if client.client_secret and client.auth_method == "client_secret_basic":
        pair = f"{quote(client.client_id, safe='')}:{quote(client.client_secret, safe='')}"
        headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
    elif client.client_secret:
        data["client_secret"] = client.client_secret
    return data, headers


def _token_request(discovery: Discovery, client: Client, data: dict[str, str], policy: OutboundPolicy,
                   what: str) -> Tokens:
    from mcp.shared.auth import OAuthToken  # the SDK on first use (see the imports)

    endpoint = str(discovery.server.token_endpoint)
    form, headers = _client_auth(client, data)
    started = time.time()
    with _step(what, endpoint, policy):
        answer = fetch("POST", endpoint, policy=policy, headers=headers, content=urlencode(form))
    if answer.status != 200:
        error = _oauth_error(answer)
        if error in ("invalid_grant", "invalid_client", "unauthorized_client"):
            raise GrantInvalid(f"{what} refused by {safe_url(endpoint)}: {error}; authorize again")
        raise OAuthFailed(f"{what} at {safe_url(endpoint)} failed: {error}")
    try:
        token = OAuthToken.model_validate_json(answer.content)
    except ValidationError:
        raise OAuthFailed(f"{what} at {safe_url(endpoint)} answered no usable token") from None
    return Tokens(access_token=token.access_token, refresh_token=token.refresh_token or "",
                  expires_at=started + token.expires_in if token.expires_in else None, scope=token.scope or "")


def exchange_code(discovery: Discovery, client: Client, *, code: str, code_verifier: str, redirect_uri: str,
                  policy: OutboundPolicy) -> Tokens:
    return _token_request(discovery, client, {
        "grant_type": "authorization_code", "code": code, "redirect_uri": redirect_uri,
        "code_verifier": code_verifier, "resource": discovery.resource,
    }, policy, "the code exchange")


def refresh(discovery: Discovery, client: Client, *, refresh_token: str, policy: OutboundPolicy) -> Tokens:
    tokens = _token_request(discovery, client, {
        "grant_type": "refresh_token", "refresh_token": refresh_token, "resource": discovery.resource,
    }, policy, "the token refresh")
    # A server that does not rotate keeps the old refresh token valid (RFC 6749 §6).
    return tokens if tokens.refresh_token else Tokens(tokens.access_token, refresh_token, tokens.expires_at, tokens.scope)


def revoke(discovery: Discovery, client: Client, *, token: str, hint: str, policy: OutboundPolicy) -> bool:
    """RFC 7009 where offered; False when the server offers no revocation or it failed (disconnect goes on)."""
    endpoint = discovery.server.revocation_endpoint
    if endpoint is None:
        return False
    form, headers = _client_auth(client, {"token": token, "token_type_hint": hint})
    try:
        with deadline(policy.timeout_s):
            return fetch("POST", str(endpoint), policy=policy, headers=headers, content=urlencode(form)).status == 200
    except RuntimeToolError:
        return False


def _oauth_error(answer: FetchedResponse) -> str:
    """The RFC 6749 `error` code of a refusal (a fixed vocabulary), else the status: never the body."""
    try:
        error = json.loads(answer.content).get("error")
    except (ValueError, AttributeError):
        error = None
    if isinstance(error, str) and error.replace("_", "").isalpha() and len(error) <= 40:
        return error
    return f"HTTP {answer.status}"
