"""django-oauth-toolkit's request validator with Toolhub's rules: the one `mcp` scope, and every grant bound to
exactly one agent's gateway URL (RFC 8707), which the token request may repeat but never change."""

from __future__ import annotations

from typing import Any

from oauth2_provider.oauth2_validators import OAuth2Validator
from oauthlib.oauth2.rfc6749.errors import CustomOAuth2Error

from agents_app.gateway.oauth.resource import SCOPE, bound_agent


class GatewayValidator(OAuth2Validator):
    def get_default_scopes(self, client_id: str, request: Any, *args: Any, **kwargs: Any) -> list[str]:
        return [SCOPE]

    def validate_scopes(self, client_id: str, scopes: list[str], client: Any, request: Any, *args: Any,
                        **kwargs: Any) -> bool:
        return set(scopes) <= {SCOPE}

    def _check_and_set_request_resource(self, request: Any) -> None:
        super()._check_and_set_request_resource(request)
        # A token names one agent: a grant without exactly one agent resource (none of Toolhub's pages
        # makes one) issues nothing.
        if bound_agent(list(request.resource or [])) is None:
            raise CustomOAuth2Error(error="invalid_target", status_code=400,
                                    description="a token is issued for exactly one agent's gateway URL")
