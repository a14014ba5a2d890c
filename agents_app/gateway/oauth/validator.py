"""django-oauth-toolkit's request validator with Toolhub's rules: the one `mcp` scope, every grant bound to
exactly one agent's gateway URL (RFC 8707), which the token request may repeat but never change, and a replayed
authorization code revoking what was issued from it (RFC 6749 §4.1.2, RFC 9700 §4.5)."""

from __future__ import annotations

import uuid
from typing import Any

from oauth2_provider.models import get_grant_model, get_refresh_token_model
from oauth2_provider.oauth2_validators import OAuth2Validator
from oauthlib.oauth2.rfc6749.errors import CustomOAuth2Error

from agents_app.gateway.resource import SCOPE, bound_agent

# The refresh-token family of a code's tokens is named after the client and the code, so a second use of the code
# (the grant row is gone once spent) finds the family to revoke without storing the code anywhere.
_CODE_FAMILY = uuid.UUID("0b9d0e4e-6c55-4b55-9d31-6a0c5f6f0d21")


def code_family(client_id: str, code: str) -> uuid.UUID:
    return uuid.uuid5(_CODE_FAMILY, f"{client_id}\n{code}")


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

    def validate_code(self, client_id: str, code: str, client: Any, request: Any, *args: Any,
                      **kwargs: Any) -> bool:
        valid = bool(super().validate_code(client_id, code, client, request, *args, **kwargs))
        if not valid and not get_grant_model().objects.filter(code=code, application=client).exists():
            # Spent (or never issued): whoever holds the tokens of a spent code may have stolen it, or the
            # code was; either way those tokens end now. An unknown code names an empty family.
            get_refresh_token_model().revoke_family(code_family(client_id, code))
        return valid

    def _create_refresh_token(self, request: Any, refresh_token_code: str, access_token: Any,
                              previous_refresh_token: Any) -> Any:
        refresh = super()._create_refresh_token(request, refresh_token_code, access_token, previous_refresh_token)
        if previous_refresh_token is None and request.grant_type == "authorization_code":
            refresh.token_family = code_family(request.client_id, request.code)
            refresh.save(update_fields=["token_family"])
        return refresh
