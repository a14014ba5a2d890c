"""LOCAL tools: an MCP server started as a child process over stdio."""

from __future__ import annotations

import re
from typing import ClassVar

from pydantic import Field, ValidationInfo, field_validator

from tools_app.configs.base import (
    ConfigSpec,
    check_user_secrets,
    not_secret_field,
    secret_map,
    timeout,
    user_secrets_field,
)
from tools_app.runtime.mcp.spec import LocalSpec
from tools_app.runtime.sandbox import ServerSandbox

ENV_NAME = re.compile(r"^[^=\x00]{1,256}$")
USER_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,255}$")


class LocalConfig(ConfigSpec):
    tool_type: ClassVar[str] = "LOCAL"

    command: str = Field(min_length=1, description="The program to start (looked up on PATH), e.g. npx or uvx")
    args: list[str] = Field(default_factory=list, description="Command-line arguments, one per item")
    env: dict[str, str] = secret_map(
        "Environment variables for the server; values are secret unless listed in not_secret")
    cwd: str | None = Field(default=None, description="Working directory (default: the tenant workspace)")
    startup_timeout_s: float = timeout(30, "How long the server may take to answer initialize")
    call_timeout_s: float = timeout(60, "How long one call may take")
    version_check: bool = Field(default=False, description="Run `<command> --version` before starting")
    roots: list[str] | None = Field(
        default=None, description="Directories offered to the server as MCP roots (absolute paths); "
                                   "null offers the tenant workspace, [] offers none")
    user_secrets: list[str] = user_secrets_field("Environment variables")
    not_secret: list[str] = not_secret_field()
    sampling: bool = Field(default=False, description="Offer MCP sampling: when an agent's call asks for a model "
                                                      "completion, the agent's own model answers it once the "
                                                      "chat's user approves (off by default)")
    elicitation: bool = Field(default=True, description="Offer MCP elicitation: a server's question during a "
                                                        "streamed chat is shown to the user, whose answer goes back; "
                                                        "elsewhere it is declined with the reason")

    @field_validator("roots")
    @classmethod
    def _roots(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and not all(item.startswith("/") and "\x00" not in item for item in value):
            raise ValueError("must be absolute directory paths")
        return value

    @field_validator("command")
    @classmethod
    def _command(cls, value: str) -> str:
        if not value.strip() or "\x00" in value:
            raise ValueError("must name a program")
        return value.strip()

    @field_validator("env")
    @classmethod
    def _env(cls, value: dict[str, str]) -> dict[str, str]:
        for name, item in value.items():
            if not ENV_NAME.match(name):
                raise ValueError(f"{name[:100]!r} is not a valid environment variable name")
            if "\x00" in item:
                raise ValueError(f"{name!r} contains a NUL character")
        return value

    @field_validator("user_secrets")
    @classmethod
    def _user_secrets(cls, value: list[str], info: ValidationInfo) -> list[str]:
        return check_user_secrets(value, pattern=USER_ENV_NAME, kind="environment variable",
                                  configured=info.data.get("env") or {})

    @field_validator("cwd", mode="before")
    @classmethod
    def _cwd(cls, value: object) -> object:
        return None if value == "" else value

    def target(self, default_roots: tuple[str, ...] = (), sandbox: ServerSandbox | None = None) -> LocalSpec:
        return LocalSpec(command=self.command, args=tuple(self.args), env=tuple(sorted(self.env.items())),
                         cwd=self.cwd or None, startup_timeout_s=float(self.startup_timeout_s),
                         call_timeout_s=float(self.call_timeout_s), version_check=bool(self.version_check),
                         roots=default_roots if self.roots is None else tuple(self.roots),
                         sampling=self.sampling, elicitation=self.elicitation, sandbox=sandbox)
