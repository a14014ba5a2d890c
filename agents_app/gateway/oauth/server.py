"""oauthlib's server narrowed to what Toolhub's authorization server offers: the authorization code grant with
PKCE S256 (plain is refused before anyone is asked to consent) and refresh tokens."""

from __future__ import annotations

from typing import Any

from oauthlib.oauth2 import Server
from oauthlib.oauth2.rfc6749.grant_types.authorization_code import code_challenge_method_s256


class GatewayServer(Server):
    def __init__(self, request_validator: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(request_validator, *args, **kwargs)
        # Per instance: oauthlib keeps the methods in a class attribute every other server shares.
        self.auth_grant._code_challenge_methods = {"S256": code_challenge_method_s256}
        # No implicit, password, client credentials or device grants, whatever an application row says.
        for response_type in ("token", "none"):
            self.response_types.pop(response_type, None)
        for grant in ("password", "client_credentials", "urn:ietf:params:oauth:grant-type:device_code"):
            self.grant_types.pop(grant, None)
