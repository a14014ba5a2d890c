"""The checks `ClientSession.send_request` and `call_tool` make of a tools/call answer, for the paths that send the
call without the SDK's dispatcher (post.OnePost, oneline.OneLine): the same result or error back."""

from __future__ import annotations

from typing import Any

import mcp_types as types
from mcp.client.extension import UnexpectedClaimedResult
from mcp.client.session import ClientSession, _clamp_inbound_ttl, _later_revision_fields
from mcp.shared.exceptions import MCPError
from mcp_types import methods as _methods

METHOD = "tools/call"
# The SDK's fallback revision for validating a result before one is negotiated (ClientSession.send_request).
UNNEGOTIATED = "2025-11-25"


async def checked_result(session: ClientSession, name: str, outcome: dict[str, Any] | types.ErrorData) -> Any:
    """ClientSession.send_request's and call_tool's checks of an answer, in their order."""
    if isinstance(outcome, types.ErrorData):
        raise MCPError(code=outcome.code, message=outcome.message, data=outcome.data)
    raw = outcome
    _clamp_inbound_ttl(raw)
    version = session._negotiated_version or UNNEGOTIATED
    try:
        _methods.validate_server_result(METHOD, version, raw)
    except KeyError:
        pass
    if not (foreign := _later_revision_fields(METHOD, version)).isdisjoint(raw):
        raw = {key: value for key, value in raw.items() if key not in foreign}
    result = session._call_tool_adapter.validate_python(raw, by_name=False)
    if isinstance(result, types.CallToolResult) and not result.is_error:
        await session.validate_tool_result(name, result)
    if not isinstance(result, types.CallToolResult | types.InputRequiredResult):
        raise UnexpectedClaimedResult(result)
    return result
