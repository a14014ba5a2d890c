"""REMOTE tools: an MCP server reached over streamable HTTP or SSE."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, field_validator

from tools_app.configs.base import (
    ConfigSpec,
    check_headers,
    check_http_url,
    not_secret_field,
    secret_map,
    timeout,
)
from tools_app.runtime.mcp.spec import RemoteSpec

TRANSPORTS = ("streamable_http", "sse")


class RemoteConfig(ConfigSpec):
    tool_type: ClassVar[str] = "REMOTE"

    url: str = Field(description="The server's MCP endpoint, http:// or https://")
    transport: Literal["streamable_http", "sse"] = Field(default="streamable_http",
                                                         description="streamable_http (current) or sse (legacy)")
    headers: dict[str, str] = secret_map(
        "HTTP headers sent with every request (e.g. Authorization); values are secret unless listed in not_secret")
    timeout_s: float = timeout(30, "Connect and per-call timeout")
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

    @field_validator("headers")
    @classmethod
    def _headers(cls, value: dict[str, str]) -> dict[str, str]:
        check_headers(value)
        return value

    def target(self) -> RemoteSpec:
        return RemoteSpec(url=self.url, transport=self.transport, headers=tuple(sorted(self.headers.items())),
                          timeout_s=float(self.timeout_s), sampling=self.sampling, elicitation=self.elicitation)
