"""The checks `ClientSession.send_request` and `call_tool` make of a tools/call answer, for the paths that send the
call without the SDK's dispatcher (post.OnePost, oneline.OneLine, rawpost.RawPost): the same result or error back."""

from __future__ import annotations

from typing import Any

import mcp_types as types
from mcp.client.extension import UnexpectedClaimedResult
from mcp.client.session import ClientSession, _clamp_inbound_ttl, _later_revision_fields
from mcp.shared._otel import inject_trace_context
from mcp.shared.exceptions import MCPError
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
from mcp_types import methods as _methods

METHOD = "tools/call"
# The SDK's fallback revision for validating a result before one is negotiated (ClientSession.send_request).
UNNEGOTIATED = "2025-11-25"


def stamped_params(session: ClientSession, name: str, arguments: dict[str, Any],
                   input_responses: types.InputResponses | None = None,
                   request_state: str | None = None) -> tuple[dict[str, Any], dict[str, str] | None]:
    """The call's params as the session stamps them (`_meta`: revision, client info, capabilities, log level) and the
    stamp's headers (MCP-Protocol-Version, Mcp-Method, Mcp-Name, Mcp-Param-*; None when it adds none)."""
    data = types.CallToolRequest(params=types.CallToolRequestParams(
        name=name, arguments=arguments, input_responses=input_responses, request_state=request_state,
    )).model_dump(by_alias=True, mode="json", exclude_none=True)
    opts: dict[str, Any] = {}
    session._stamp(data, opts)  # type: ignore[arg-type]  # CallOptions is a TypedDict of optional keys
    return dict(data["params"]), opts.get("headers")


def fresh_id(dispatcher: JSONRPCDispatcher, taken: Any = ()) -> int:
    """The next id of the session's own counter (one id space with the requests its dispatcher sends) that no
    request in flight holds: neither the dispatcher's nor one in `taken`."""
    request_id = dispatcher._allocate_id()
    while request_id in dispatcher._pending or request_id in taken:
        request_id = dispatcher._allocate_id()
    return request_id


def with_meta(params: dict[str, Any], request_id: int, progress: bool) -> dict[str, Any]:
    """`params` with the dispatcher's additions to `_meta`: progressToken = the id when progress is asked, the trace
    context; `_meta` left out when empty."""
    meta = dict(params.get("_meta") or {})
    if progress:
        meta["progressToken"] = request_id
    inject_trace_context(meta)
    if meta:
        params["_meta"] = meta
    else:
        params.pop("_meta", None)
    return params


async def checked_result(session: ClientSession, name: str, outcome: dict[str, Any] | types.ErrorData) -> Any:
    """ClientSession.send_request's and call_tool's checks of an answer, in their order."""
    if isinstance(outcome, types.ErrorData):
        raise MCPError(code=outcome.code, message=outcome.message, data=outcome.data)
    result = protocol_checked(session, outcome)
    if isinstance(result, types.CallToolResult) and not result.is_error:
        await session.validate_tool_result(name, result)
    return claimed(result)


def protocol_checked(session: ClientSession, raw: dict[str, Any]) -> Any:
    """send_request's checks of a result and call_tool's typing of it (before the tool's output schema)."""
    _clamp_inbound_ttl(raw)
    version = session._negotiated_version or UNNEGOTIATED
    try:
        _methods.validate_server_result(METHOD, version, raw)
    except KeyError:
        pass
    if not (foreign := _later_revision_fields(METHOD, version)).isdisjoint(raw):
        raw = {key: value for key, value in raw.items() if key not in foreign}
    return session._call_tool_adapter.validate_python(raw, by_name=False)


def claimed(result: Any) -> Any:
    """call_tool's last check: a result of a kind this call did not opt into is refused."""
    if not isinstance(result, types.CallToolResult | types.InputRequiredResult):
        raise UnexpectedClaimedResult(result)
    return result


def output_checked(session: ClientSession, name: str, result: types.CallToolResult) -> None:
    """ClientSession.validate_tool_result when the tool's output schema is cached already (no listing, no loop: the
    raw path, rawpost.py, runs only then), word for word."""
    from jsonschema import exceptions as jsonschema_exceptions
    from referencing.exceptions import Unresolvable

    output_schema = session._tool_output_schemas.get(name)
    if output_schema is None:
        return
    if result.structured_content is None and "structured_content" not in result.model_fields_set:
        raise RuntimeError(f"Tool {name} has an output schema but did not return structured content")
    validator = session._output_schema_validator(name, output_schema)
    errors = validator.iter_errors(result.structured_content)
    try:
        error = jsonschema_exceptions.best_match(errors)
    except Unresolvable as e:
        raise RuntimeError(f"Invalid schema for tool {name}: {e}") from e
    if error is not None:
        raise RuntimeError(f"Invalid structured content returned by tool {name}: {error}") from error
