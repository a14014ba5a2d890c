"""OpenID Connect against one tenant's provider, on mozilla-django-oidc's backend: discovery, the code exchange
with PKCE, and the id token's checks. Every request to the provider goes through core.outbound's guard.

The library checks the signature (against the provider's JWKS) and the nonce; it skips the issuer and the
audience (it decodes with verify_aud off and no issuer), so `_verify_jws` adds both, plus exp/iat/sub and `azp`
when the token names several audiences."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import jwt
from django.conf import settings
from django.core.cache import cache
from django.core.exceptions import SuspiciousOperation
from django.utils.crypto import get_random_string
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.utils import generate_code_challenge

from core import outbound
from core.errors import RuntimeToolError
from core.links import public_url
from identity_app.models import IdentityProvider

CALLBACK_PATH = "/accounts/sso/callback/"
# RS and ES only: the library verifies anything else with the client secret.
PREFERRED_ALGS = ("RS256", "ES256", "RS384", "RS512", "ES384", "ES512")


class ProviderError(Exception):
    """The provider could not be reached, or answered something unusable; the message is safe to show."""


def redirect_uri() -> str:
    """What a tenant registers at its provider: one callback for every provider (the state names the provider)."""
    return public_url(CALLBACK_PATH)


def policy() -> outbound.OutboundPolicy:
    return outbound.OutboundPolicy.build(settings.TOOLHUB_OUTBOUND_ALLOW, max_bytes=1024 * 1024,
                                         timeout_s=min(settings.TOOLHUB_OUTBOUND_TIMEOUT_S, 15.0))


def _get_json(url: str, **kwargs: Any) -> Any:
    try:
        answer = outbound.fetch("GET", url, policy=policy(), **kwargs)
    except RuntimeToolError as exc:
        raise ProviderError(f"the provider could not be reached: {exc.message}") from None
    if answer.status != 200:
        raise ProviderError(f"the provider answered HTTP {answer.status} for {url.split('?')[0]}")
    try:
        return json.loads(answer.content)
    except ValueError:
        raise ProviderError(f"the provider's answer at {url.split('?')[0]} is not JSON") from None


@dataclass(frozen=True)
class Discovery:
    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    jwks_uri: str
    userinfo_endpoint: str | None
    algs: tuple[str, ...]
    auth_methods: tuple[str, ...]


def discover(provider: IdentityProvider) -> Discovery:
    """The provider's OpenID configuration (cached 10 minutes); its issuer must be the configured one exactly."""
    key = f"identity:discovery:{provider.pk}:{provider.issuer}"
    doc = cache.get(key)
    if doc is None:
        doc = _get_json(provider.issuer.rstrip("/") + "/.well-known/openid-configuration")
        if not isinstance(doc, dict):
            raise ProviderError("the provider's discovery document is not an object")
        cache.set(key, doc, 600)
    if str(doc.get("issuer", "")).rstrip("/") != provider.issuer.rstrip("/"):
        raise ProviderError("the discovery document names another issuer than the one configured")
    try:
        return Discovery(
            issuer=str(doc["issuer"]), authorization_endpoint=str(doc["authorization_endpoint"]),
            token_endpoint=str(doc["token_endpoint"]), jwks_uri=str(doc["jwks_uri"]),
            userinfo_endpoint=doc.get("userinfo_endpoint"),
            algs=tuple(doc.get("id_token_signing_alg_values_supported") or ("RS256",)),
            auth_methods=tuple(doc.get("token_endpoint_auth_methods_supported") or ("client_secret_basic",)),
        )
    except KeyError as missing:
        raise ProviderError(f"the provider's discovery document has no {missing.args[0]}") from None


def signing_alg(found: Discovery) -> str:
    for alg in PREFERRED_ALGS:
        if alg in found.algs:
            return alg
    raise ProviderError(f"the provider signs id tokens with none of {', '.join(PREFERRED_ALGS)}")


@dataclass(frozen=True)
class AuthorizationRequest:
    url: str
    state: str
    nonce: str
    code_verifier: str


def authorization_request(provider: IdentityProvider) -> AuthorizationRequest:
    """Where to send the browser: the provider's authorize endpoint with state, nonce and a PKCE S256 challenge."""
    found = discover(provider)
    state, nonce = get_random_string(32), get_random_string(32)
    verifier = get_random_string(64)
    params = {
        "response_type": "code", "client_id": provider.client_id, "redirect_uri": redirect_uri(),
        "scope": "openid email profile", "state": state, "nonce": nonce,
        "code_challenge": generate_code_challenge(verifier, "S256"), "code_challenge_method": "S256",
    }
    sep = "&" if "?" in found.authorization_endpoint else "?"
    return AuthorizationRequest(url=found.authorization_endpoint + sep + urlencode(params), state=state, nonce=nonce,
                                code_verifier=verifier)


class ProviderBackend(OIDCAuthenticationBackend):  # type: ignore[misc]  # the library ships no types
    """mozilla-django-oidc's backend bound to one provider instead of the settings, and to the outbound guard."""

    def __init__(self, provider: IdentityProvider) -> None:  # the library's __init__ reads settings: not called
        self.provider = provider
        self.discovery = discover(provider)
        self.OIDC_OP_TOKEN_ENDPOINT = self.discovery.token_endpoint
        self.OIDC_OP_USER_ENDPOINT = self.discovery.userinfo_endpoint
        self.OIDC_OP_JWKS_ENDPOINT = self.discovery.jwks_uri
        self.OIDC_RP_CLIENT_ID = provider.client_id
        self.OIDC_RP_CLIENT_SECRET = (provider.client_secret or {}).get("value", "")
        self.OIDC_RP_SIGN_ALGO = signing_alg(self.discovery)
        self.OIDC_RP_IDP_SIGN_KEY = None

    def get_settings(self, attr: str, *args: Any) -> Any:
        # Per provider, never the global OIDC_* settings: nonce always on, unsigned tokens never accepted.
        fixed = {"OIDC_USE_NONCE": True, "OIDC_ALLOW_UNSECURED_JWT": False, "OIDC_VERIFY_KID": True}
        if attr in fixed:
            return fixed[attr]
        if args:
            return args[0]
        raise KeyError(attr)

    def retrieve_matching_jwk(self, token: str) -> Any:
        jwks = _get_json(self.OIDC_OP_JWKS_ENDPOINT)
        header = jwt.get_unverified_header(token)
        for jwk in jwks.get("keys", []) if isinstance(jwks, dict) else []:
            if "kid" in header and jwk.get("kid") != header["kid"]:
                continue
            if jwk.get("alg", header.get("alg")) != header.get("alg") or jwk.get("use", "sig") != "sig":
                continue
            return jwt.PyJWK(jwk)
        raise SuspiciousOperation("no key of the provider's JWKS matches the id token")

    def _verify_jws(self, payload: str, key: Any) -> dict[str, Any]:
        header = jwt.get_unverified_header(payload)
        if header.get("alg") != self.OIDC_RP_SIGN_ALGO:
            raise SuspiciousOperation(f"the id token is signed with {header.get('alg')!r}, "
                                      f"expected {self.OIDC_RP_SIGN_ALGO}")
        try:
            claims: dict[str, Any] = jwt.decode(
                payload, key, algorithms=[self.OIDC_RP_SIGN_ALGO], audience=self.OIDC_RP_CLIENT_ID,
                issuer=self.discovery.issuer, leeway=60,
                options={"require": ["exp", "iat", "iss", "aud", "sub"]},
            )
        except jwt.InvalidAudienceError:
            raise SuspiciousOperation("the id token was issued for another client (audience)") from None
        except jwt.InvalidIssuerError:
            raise SuspiciousOperation("the id token was issued by another issuer") from None
        except jwt.InvalidSignatureError:
            raise SuspiciousOperation("the id token's signature does not verify") from None
        except jwt.PyJWTError as exc:
            raise SuspiciousOperation(f"the id token is not valid: {type(exc).__name__}") from None
        audiences = claims["aud"] if isinstance(claims["aud"], list) else [claims["aud"]]
        if len(audiences) > 1 and claims.get("azp") != self.OIDC_RP_CLIENT_ID:
            raise SuspiciousOperation("the id token names several audiences and another authorized party")
        return claims

    def get_token(self, payload: dict[str, Any]) -> dict[str, Any]:
        form = dict(payload)
        headers = {"Accept": "application/json", "Content-Type": "application/x-www-form-urlencoded"}
        if "client_secret_post" not in self.discovery.auth_methods and form.get("client_secret"):
            import base64
            from urllib.parse import quote

            pair = f"{quote(form['client_id'], safe='')}:{quote(form.pop('client_secret'), safe='')}"
            headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
        try:
            answer = outbound.fetch("POST", self.OIDC_OP_TOKEN_ENDPOINT, policy=policy(), headers=headers,
                                    content=urlencode(form))
        except RuntimeToolError as exc:
            raise ProviderError(f"the provider's token endpoint could not be reached: {exc.message}") from None
        try:
            body = json.loads(answer.content)
        except ValueError:
            body = {}
        if answer.status != 200 or not isinstance(body, dict):
            error = body.get("error") if isinstance(body, dict) else None
            raise ProviderError(f"the provider refused the code exchange (HTTP {answer.status}"
                                + (f", {str(error)[:40]}" if isinstance(error, str) else "") + ")")
        return body

    def get_userinfo(self, access_token: str, id_token: str, payload: dict[str, Any]) -> dict[str, Any]:
        """The id token's claims, completed by the userinfo endpoint's (same subject) where there is one."""
        claims = dict(payload)
        if self.OIDC_OP_USER_ENDPOINT and access_token:
            info = _get_json(self.OIDC_OP_USER_ENDPOINT, headers={"Authorization": f"Bearer {access_token}"})
            if isinstance(info, dict) and info.get("sub") == payload.get("sub"):
                for name, value in info.items():
                    claims.setdefault(name, value)
        return claims

    def exchange(self, *, code: str, nonce: str, code_verifier: str) -> dict[str, Any]:
        """The code for tokens (PKCE), the id token checked (signature, issuer, audience, nonce), its claims."""
        token_info = self.get_token({
            "client_id": self.OIDC_RP_CLIENT_ID, "client_secret": self.OIDC_RP_CLIENT_SECRET,
            "grant_type": "authorization_code", "code": code, "redirect_uri": redirect_uri(),
            "code_verifier": code_verifier,
        })
        id_token = token_info.get("id_token")
        if not isinstance(id_token, str) or not id_token:
            raise SuspiciousOperation("the provider sent no id token")
        try:
            payload = self.verify_token(id_token, nonce=nonce)
        except jwt.PyJWTError as exc:
            raise SuspiciousOperation(f"the id token is not valid: {type(exc).__name__}") from None
        return self.get_userinfo(str(token_info.get("access_token") or ""), id_token, payload)
