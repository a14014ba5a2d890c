"""Typed runtime errors: raised by runtime code, mapped to API errors by the Django side."""

from __future__ import annotations

from core.errors import (
    BusinessError,
    InvalidParams,
    OutboundBlocked,
    ResponseTooLarge,
    RuntimeToolError,
    ToolTimeout,
)

__all__ = [
    "BusinessError", "InvalidParams", "OutboundBlocked", "ResponseTooLarge", "RuntimeToolError", "ToolRefused",
    "ToolTimeout",
]


class ToolRefused(RuntimeToolError):
    """A tool refused the call up front (its refusal or before_approval hook, or no user where one is needed)."""

    code = "refused"
    result_code = "REFUSED"


class AuthorizationNeeded(RuntimeToolError):
    """An OAuth tool has no usable connection for this caller (never connected, or the grant was revoked)."""

    code = "authorization_required"
    result_code = "AUTHORIZATION_REQUIRED"


class CapacityExceeded(RuntimeToolError):
    code = "capacity_exceeded"


class ConnectionFailed(RuntimeToolError):
    code = "connection_failed"


class CommandNotFound(RuntimeToolError):
    code = "command_not_found"


class StartupTimeout(RuntimeToolError):
    code = "startup_timeout"
    result_code = "TIMEOUT"


class ProtocolError(RuntimeToolError):
    code = "protocol_error"


# --- MCP client runtime (tools_app/runtime/mcp) ---


class CommandNotExecutable(CommandNotFound):
    """The configured command exists but is not an executable file."""

    code = "command_not_executable"


class ServerExited(ConnectionFailed):
    """A LOCAL server process exited before or during the session; the message carries its stderr tail."""

    code = "server_exited"


class RemoteHTTPError(ConnectionFailed):
    """A REMOTE server answered with an HTTP error status (the status is in the message and details)."""

    code = "remote_http_error"


class WrongTransport(ConnectionFailed):
    """The URL does not speak the configured transport (streamable_http vs sse)."""

    code = "wrong_transport"


class MalformedResult(ProtocolError):
    """A tool result that does not match the protocol or the tool's declared output schema."""

    code = "malformed_result"
