"""Typed runtime errors: raised by runtime code, mapped to API errors by the Django side."""

from __future__ import annotations

from typing import Any


class RuntimeToolError(Exception):
    """Base of every runtime failure; `code` is a stable snake_case identifier."""

    code = "runtime_error"
    result_code = "EXECUTION_ERROR"  # the ToolResult error_code this maps to

    def __init__(self, message: str, *, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or {}


class InvalidParams(RuntimeToolError):
    code = "invalid_params"
    result_code = "INVALID_PARAMS"


class BusinessError(RuntimeToolError):
    code = "business_error"
    result_code = "BUSINESS_ERROR"


class ToolTimeout(RuntimeToolError):
    code = "timeout"
    result_code = "TIMEOUT"


class OutboundBlocked(RuntimeToolError):
    """A URL or resolved address the outbound guard refuses."""

    code = "outbound_blocked"
    result_code = "BUSINESS_ERROR"


class ResponseTooLarge(RuntimeToolError):
    code = "response_too_large"
    result_code = "BUSINESS_ERROR"


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
