"""What to connect to: immutable LOCAL/REMOTE server specs, built from a tool's validated config spec."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from tools_app.runtime.sandbox import ServerSandbox


@dataclass(frozen=True)
class LocalSpec:
    command: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    cwd: str | None = None
    startup_timeout_s: float = 30
    call_timeout_s: float = 60
    version_check: bool = False
    # Directories offered to the server as MCP roots (absolute paths); empty offers no roots capability.
    roots: tuple[str, ...] = ()
    # Client capabilities offered in initialize (see runtime.mcp.client_requests).
    sampling: bool = False
    elicitation: bool = True
    # The tenant's OS sandbox; None runs the server as Toolhub's own user (only by the operator's explicit choice).
    sandbox: ServerSandbox | None = None

    # Env values are secrets: keep them out of reprs that may reach logs.
    def __repr__(self) -> str:
        names = [name for name, _ in self.env]
        return (
            f"LocalSpec(command={self.command!r}, args={self.args!r}, env={names!r}, cwd={self.cwd!r}, "
            f"startup_timeout_s={self.startup_timeout_s}, call_timeout_s={self.call_timeout_s})"
        )


@dataclass(frozen=True)
class RemoteSpec:
    url: str
    transport: str = "streamable_http"
    headers: tuple[tuple[str, str], ...] = ()
    timeout_s: float = 30
    sampling: bool = False
    elicitation: bool = True
    # OAuth: called (in a worker thread) for the access token to send; given the token a 401 refused, it
    # returns a newer one (refreshing if nobody has). It raises AuthorizationNeeded when there is none.
    token: Callable[[str | None], str] | None = field(default=None, compare=False, hash=False)

    # Header values are secrets: keep them out of reprs that may reach logs.
    def __repr__(self) -> str:
        names = [name for name, _ in self.headers]
        return f"RemoteSpec(url={self.url!r}, transport={self.transport!r}, headers={names!r}, timeout_s={self.timeout_s})"


@dataclass(frozen=True)
class ServerSpec:
    tool_id: int
    config_version: int
    tenant_key: str
    target: LocalSpec | RemoteSpec
    # Whose session this is when a tool acts as each user upstream (per-user OAuth or credentials): "user:<id>@<v>";
    # empty for a session every caller shares. Part of the key, so one user's session never serves another.
    principal: str = ""

    @property
    def key(self) -> tuple[int, int, str]:
        return (self.tool_id, self.config_version, self.principal)

    @property
    def call_timeout_s(self) -> float:
        return self.target.call_timeout_s if isinstance(self.target, LocalSpec) else self.target.timeout_s

    @property
    def startup_timeout_s(self) -> float:
        return self.target.startup_timeout_s if isinstance(self.target, LocalSpec) else self.target.timeout_s
