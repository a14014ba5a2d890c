"""Typed runtime errors: raised by runtime code, mapped to API errors by the Django side."""

from __future__ import annotations

from core.codes import ApiCode, ResultCode
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

    code = ApiCode.REFUSED
    result_code = ResultCode.REFUSED


class AuthorizationNeeded(RuntimeToolError):
    """An OAuth tool has no usable connection for this caller (never connected, or the grant was revoked)."""

    code = ApiCode.AUTHORIZATION_REQUIRED
    result_code = ResultCode.AUTHORIZATION_REQUIRED


class CredentialsNeeded(RuntimeToolError):
    """A tool that acts as each user has keys this caller has not set (details: `missing`, the key names)."""

    code = ApiCode.CREDENTIALS_REQUIRED
    result_code = ResultCode.CREDENTIALS_REQUIRED


class CapacityExceeded(RuntimeToolError):
    code = ApiCode.CAPACITY_EXCEEDED


class ConnectionFailed(RuntimeToolError):
    code = ApiCode.CONNECTION_FAILED


class CommandNotFound(RuntimeToolError):
    code = ApiCode.COMMAND_NOT_FOUND


class StartupTimeout(RuntimeToolError):
    code = ApiCode.STARTUP_TIMEOUT
    result_code = ResultCode.TIMEOUT


class ProtocolError(RuntimeToolError):
    code = ApiCode.PROTOCOL_ERROR


# --- MCP client runtime (tools_app/runtime/mcp) ---


class CommandNotExecutable(CommandNotFound):
    """The configured command exists but is not an executable file."""

    code = ApiCode.COMMAND_NOT_EXECUTABLE


class ServerExited(ConnectionFailed):
    """A LOCAL server process exited before or during the session; the message carries its stderr tail."""

    code = ApiCode.SERVER_EXITED


class RemoteHTTPError(ConnectionFailed):
    """A REMOTE server answered with an HTTP error status (the status is in the message and details)."""

    code = ApiCode.REMOTE_HTTP_ERROR


class WrongTransport(ConnectionFailed):
    """The URL does not speak the configured transport (streamable_http vs sse)."""

    code = ApiCode.WRONG_TRANSPORT


class ProtocolVersionUnsupported(ProtocolError):
    """The server and Toolhub share no MCP revision; `details`: `supported` (the server's), `requested`, `toolhub`."""

    code = ApiCode.PROTOCOL_VERSION_UNSUPPORTED


class InputRoundsExceeded(ProtocolError):
    """A server answered a call with `input_required` more rounds than allowed (`details.max_rounds`)."""

    code = ApiCode.INPUT_ROUNDS_EXCEEDED


class MalformedResult(ProtocolError):
    """A tool result that does not match the protocol or the tool's declared output schema."""

    code = ApiCode.MALFORMED_RESULT
