"""REMOTE tools: an MCP server reached over streamable HTTP or SSE."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from tools_app.configs.base import (
    HEADER_NAME,
    ConfigSpec,
    check_headers,
    check_http_url,
    check_user_secrets,
    not_secret_field,
    secret_map,
    timeout,
    user_secrets_field,
)
from tools_app.runtime.mcp.spec import RemoteSpec

TRANSPORTS = ("streamable_http", "sse")


class RemoteAuth(BaseModel):
    """How Toolhub authorizes to the server: static headers only (`none`) or OAuth 2.1 (`oauth2`)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    type: Literal["none", "oauth2"] = Field(default="none", description="none (static headers) or oauth2")
    per_user: bool = Field(default=False, description="oauth2: each member connects their own account "
                                                      "(false: an owner/admin connects one shared account)")
    scopes: list[str] = Field(default_factory=list, description="oauth2: scopes to ask for (default: the server's)")
    client_id: str = Field(default="", max_length=512,
                           description="oauth2: a registered client; empty: Toolhub registers itself (RFC 7591)")
    client_secret: str = Field(default="", max_length=4096,
                               description="oauth2: the registered client's secret (write-only)")

    @model_validator(mode="after")
    def _oauth_fields_need_oauth(self) -> RemoteAuth:
        if self.type == "none" and (self.per_user or self.scopes or self.client_id or self.client_secret):
            raise ValueError("per_user, scopes, client_id and client_secret apply to type oauth2 only")
        if self.client_secret and not self.client_id:
            raise ValueError("client_secret needs the client_id it belongs to")
        return self


class RemoteConfig(ConfigSpec):
    tool_type: ClassVar[str] = "REMOTE"

    url: str = Field(description="The server's MCP endpoint, http:// or https://")
    transport: Literal["streamable_http", "sse"] = Field(default="streamable_http",
                                                         description="streamable_http (current) or sse (legacy)")
    headers: dict[str, str] = secret_map(
        "HTTP headers sent with every request (e.g. Authorization); values are secret unless listed in not_secret")
    timeout_s: float = timeout(30, "Connect and per-call timeout")
    auth: RemoteAuth = Field(default_factory=RemoteAuth,
                             description="OAuth 2.1: {type: none|oauth2, per_user, scopes, client_id, client_secret}")
    user_secrets: list[str] = user_secrets_field("HTTP headers")
    not_secret: list[str] = not_secret_field()
    sampling: bool = Field(default=False, description="Offer MCP sampling: when an agent's call asks for a model "
                                                      "completion, the agent's own model answers it once the "
                                                      "chat's user approves (off by default)")
    elicitation: bool = Field(default=True, description="Offer MCP elicitation: a server's question during a "
                                                        "streamed chat is shown to the user, whose answer goes back; "
                                                        "elsewhere it is declined with the reason")

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        return check_http_url(value.strip())

    @field_validator("transport", mode="before")
    @classmethod
    def _transport(cls, value: object) -> object:
        return value.replace("-", "_") if isinstance(value, str) else value

    @field_validator("user_secrets")
    @classmethod
    def _user_secrets(cls, value: list[str], info: ValidationInfo) -> list[str]:
        return check_user_secrets(value, pattern=HEADER_NAME, kind="HTTP header", configured=info.data.get("headers") or {})

    @field_validator("headers")
    @classmethod
    def _headers(cls, value: dict[str, str]) -> dict[str, str]:
        check_headers(value)
        return value

    @classmethod
    def load(cls, stored: Mapping[str, Any] | None) -> RemoteConfig:
        spec = super().load(stored)
        if isinstance(spec.auth, dict):  # model_construct leaves the stored sub-object a dict
            object.__setattr__(spec, "auth", RemoteAuth.model_construct(**spec.auth))
        return spec

    def stored(self) -> dict[str, Any]:
        data = super().stored()
        if data.get("auth") == RemoteAuth().model_dump(mode="json"):
            data.pop("auth")  # configs saved before `auth` existed compare equal
        return data

    def target(self) -> RemoteSpec:
        return RemoteSpec(url=self.url, transport=self.transport, headers=tuple(sorted(self.headers.items())),
                          timeout_s=float(self.timeout_s), sampling=self.sampling, elicitation=self.elicitation)
