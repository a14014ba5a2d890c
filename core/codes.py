"""The one error vocabulary: every code an API answer, a call result or a refusal can carry.

Three enums, each a `StrEnum` (a member *is* its string, so `"not_found" == ApiCode.NOT_FOUND`):

- `ApiCode`: the `code` of an API error body `{"error": {"code", "message", "details"}}` (snake_case), also
  the `data.code` of a gateway JSON-RPC error and the `code` of a runtime error.
- `ResultCode`: the `error_code` of a call result (UPPER_CASE; the invoke contract). These are
  families: clients branch on them and they stay stable.
- `Reason`: the distinct cause of a refusal, sent beside the family as `error_reason` (a call result) or
  `reason` (a gateway refusal). `REASON_FAMILY` maps each cause to its family in this one place, so
  "DISABLED" stays what a client has always been told while `error_reason` says which of its six causes.

`error_body` builds the API's error envelope; every writer of one (DRF's handler, the gateway, the API
root) uses it. Django-free: runtime code and the ASGI gateway import it.

docs/errors.md is generated from this file (`manage.py toolhub_codes --write docs/errors.md`, `make docs-errors`):
a `#:` comment (on a member's line or right above it) describes that member; a plain `#` comment above members
is a note on the group that follows.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any


class ApiCode(StrEnum):
    # Generic (core)
    ERROR = "error"
    INVALID = "invalid"
    NOT_FOUND = "not_found"
    CONFLICT = "conflict"
    NAME_TAKEN = "name_taken"
    PERMISSION_DENIED = "permission_denied"
    NOT_AUTHENTICATED = "not_authenticated"
    AUTHENTICATION_FAILED = "authentication_failed"
    MALFORMED_REQUEST = "malformed_request"
    METHOD_NOT_ALLOWED = "method_not_allowed"
    NOT_ACCEPTABLE = "not_acceptable"
    UNSUPPORTED_MEDIA_TYPE = "unsupported_media_type"
    THROTTLED = "throttled"
    REQUEST_TOO_LARGE = "request_too_large"
    BUSY = "busy"
    SERVICE_UNAVAILABLE = "service_unavailable"
    INVALID_PAGE_SIZE = "invalid_page_size"
    TENANT_REQUIRED = "tenant_required"
    TENANT_NOT_AVAILABLE = "tenant_not_available"
    # Company sign-in
    SIGNIN_REFUSED = "signin_refused"
    # Tools
    TOOL_ERROR = "tool_error"
    INVALID_CONFIG = "invalid_config"
    BUILTIN_READ_ONLY = "builtin_read_only"
    TYPE_CHANGE_REFUSED = "type_change_refused"
    TOOL_DISABLED = "tool_disabled"
    INVALID_ARGUMENTS = "invalid_arguments"
    APPROVAL_REQUIRED = "approval_required"
    APPROVAL_EXPIRED = "approval_expired"
    APPROVAL_ALREADY_DECIDED = "approval_already_decided"
    INVALID_ANSWER = "invalid_answer"
    IMPORT_FAILED = "import_failed"
    INVALID_TYPE = "invalid_type"
    TYPE_CONFLICT = "type_conflict"
    UNREADABLE = "unreadable"
    SECRETS_REQUIRED = "secrets_required"
    RECORD_NOT_FOUND = "record_not_found"
    HTTP_LISTENER_PACKAGE = "http_listener_package"
    AUTHORIZATION_REQUIRED = "authorization_required"
    CREDENTIALS_REQUIRED = "credentials_required"
    OAUTH_FLOW_REFUSED = "oauth_flow_refused"
    OAUTH_FAILED = "oauth_failed"
    OAUTH_RESOURCE_MISMATCH = "oauth_resource_mismatch"  #: RFC 9728 §3.3: metadata naming another resource
    # Quotas and usage
    QUOTA_EXCEEDED = "quota_exceeded"
    INVALID_QUOTA = "invalid_quota"
    INVALID_TIME = "invalid_time"
    # Runtime (tools_app.runtime, core.outbound): the `code` of a RuntimeToolError
    RUNTIME_ERROR = "runtime_error"
    INVALID_PARAMS = "invalid_params"
    BUSINESS_ERROR = "business_error"
    TIMEOUT = "timeout"
    OUTBOUND_BLOCKED = "outbound_blocked"
    DNS_FAILED = "dns_failed"
    RESPONSE_TOO_LARGE = "response_too_large"
    REFUSED = "refused"
    CAPACITY_EXCEEDED = "capacity_exceeded"
    CONNECTION_FAILED = "connection_failed"
    COMMAND_NOT_FOUND = "command_not_found"
    COMMAND_NOT_EXECUTABLE = "command_not_executable"
    STARTUP_TIMEOUT = "startup_timeout"
    PROTOCOL_ERROR = "protocol_error"
    SERVER_EXITED = "server_exited"
    REMOTE_HTTP_ERROR = "remote_http_error"
    WRONG_TRANSPORT = "wrong_transport"
    MALFORMED_RESULT = "malformed_result"
    #: The server speaks no MCP revision Toolhub speaks (JSON-RPC -32022 or a handshake answer); details name both sides.
    PROTOCOL_VERSION_UNSUPPORTED = "protocol_version_unsupported"
    #: A server kept asking for input (2026-07-28 input_required) past TOOLHUB_MCP_INPUT_ROUNDS rounds.
    INPUT_ROUNDS_EXCEEDED = "input_rounds_exceeded"
    SANDBOX_UNAVAILABLE = "sandbox_unavailable"
    SANDBOX_PATH_REFUSED = "sandbox_path_refused"
    #: No LOCAL server runner can take the call (all down, or none announced yet): the deployment's outage, a 503 with
    #: Retry-After (invoke) or a JSON-RPC error (gateway); the call is audited and the tool's breaker does not count it.
    RUNNER_UNAVAILABLE = "runner_unavailable"
    # the package store (tools_app.runtime.packages): a LOCAL server run from an npm or PyPI package
    PACKAGE_NOT_INSTALLABLE = "package_not_installable"
    PACKAGE_NOT_FOUND = "package_not_found"
    PACKAGE_REGISTRY_REFUSED = "package_registry_refused"
    PACKAGE_MANAGER_MISSING = "package_manager_missing"
    PACKAGE_INSTALL_FAILED = "package_install_failed"
    PACKAGE_INSTALLING = "package_installing"
    PACKAGE_STORE_UNAVAILABLE = "package_store_unavailable"
    # Agents, chat, intents
    AGENT_ERROR = "agent_error"
    AGENT_DISABLED = "agent_disabled"
    UNKNOWN_FUNCTIONS = "unknown_functions"
    MODEL_NOT_CONFIGURED = "model_not_configured"
    MODEL_IN_USE = "model_in_use"
    MODEL_BLOCKED = "model_blocked"
    # a model call that failed (the `code` of a chat's `error` event, agents_app.runtime.model_client)
    MODEL_UNREACHABLE = "model_unreachable"
    MODEL_AUTH = "model_auth"
    MODEL_ERROR = "model_error"
    MODEL_TIMEOUT = "model_timeout"
    MAX_STEPS_EXCEEDED = "max_steps_exceeded"
    CONVERSATION_BUSY = "conversation_busy"
    NOTHING_TO_RESUME = "nothing_to_resume"
    APPROVALS_PENDING = "approvals_pending"
    INVALID_INTENT = "invalid_intent"
    INTENT_HAS_CHILDREN = "intent_has_children"
    VERSION_CONFLICT = "version_conflict"
    # MCP gateway (HTTP answers before the MCP session, and JSON-RPC error data)
    DISALLOWED_HOST = "disallowed_host"
    FORBIDDEN_ORIGIN = "forbidden_origin"
    TOO_MANY_SESSIONS = "too_many_sessions"
    UPSTREAM_ERROR = "upstream_error"
    INVALID_REQUEST_STATE = "invalid_request_state"  #: a 2026-07-28 client's requestState failed verification
    # Market (a catalog refresh's failure names its cause)
    MARKET_ERROR = "market_error"
    INVALID_SOURCE = "invalid_source"
    REFRESH_IN_PROGRESS = "refresh_in_progress"
    ENTRY_REMOVED = "entry_removed"
    NO_UPDATE_AVAILABLE = "no_update_available"
    MISSING_VARIABLES = "missing_variables"
    UNKNOWN_VARIABLES = "unknown_variables"
    SECRET_IN_ARGUMENTS = "secret_in_arguments"
    UNKNOWN_FORMAT = "unknown_format"
    UNMAPPABLE = "unmappable"  #: a catalog entry or client-config server Toolhub cannot turn into a tool
    AUTH_FAILED = "auth_failed"
    HTTP_ERROR = "http_error"
    NOT_JSON = "not_json"
    NOT_A_CATALOG = "not_a_catalog"
    TOO_MANY_PAGES = "too_many_pages"
    CURSOR_LOOP = "cursor_loop"


class ResultCode(StrEnum):
    """The `error_code` of a call result: the invoke contract's families, stable for clients."""

    #: the arguments do not fit the function's input schema (unknown, missing or mistyped)
    INVALID_PARAMS = "INVALID_PARAMS"
    NOT_FOUND = "NOT_FOUND"  #: no such function for this caller (see `error_reason`)
    DISABLED = "DISABLED"  #: the call is refused for now (see `error_reason` for which of the causes)
    APPROVAL_REQUIRED = "APPROVAL_REQUIRED"  #: the call waits for a person's approval (`approval_id`)
    TIMEOUT = "TIMEOUT"  #: the call took longer than its timeout
    #: the tool ran and reported an error of its own (an MCP `isError` result)
    BUSINESS_ERROR = "BUSINESS_ERROR"
    EXECUTION_ERROR = "EXECUTION_ERROR"  #: the tool could not be run (connection, process, protocol)
    # A tool's own refusal (plugin hooks), and a trial run asked of a tool whose effects a rollback cannot undo.
    REFUSED = "REFUSED"
    DRY_RUN_UNSUPPORTED = "DRY_RUN_UNSUPPORTED"
    # An OAuth tool without a usable connection for this caller; a tool whose per-user keys the caller has not set.
    AUTHORIZATION_REQUIRED = "AUTHORIZATION_REQUIRED"
    CREDENTIALS_REQUIRED = "CREDENTIALS_REQUIRED"
    #: A quota (per tenant, member, agent or tool: calls per minute, per day, at once) is spent until it resets.
    QUOTA_EXCEEDED = "QUOTA_EXCEEDED"
    #: A person denied the approval the call waited for (a chat's `tool.result`): it never ran.
    DENIED = "DENIED"


class Reason(StrEnum):
    """The distinct cause of a refused call (`error_reason`); its family (`error_code`) is REASON_FAMILY[reason]."""

    # the tool
    TOOL_DISABLED = "tool_disabled"  #: the tool's status is DISABLED
    TOOL_PAUSED = "tool_paused"  #: the failure breaker paused the tool (the message says until when)
    # the function
    FUNCTION_MISSING = "function_missing"  #: the tool has no such function (or it was removed upstream)
    #: the function's schema changed since approval; an admin must approve it
    FUNCTION_CHANGED = "function_changed"
    #: the screen found instructions aimed at the model in the function's definition; an admin must approve it
    FUNCTION_HELD = "function_held"
    FUNCTION_DISABLED = "function_disabled"  #: an admin disabled the function
    FUNCTION_UNSUPPORTED = "function_unsupported"  #: Toolhub cannot call it (e.g. a task-only MCP function)
    # the agent and its link
    #: the agent has no link to the tool, or its `allowed_functions` leave it out
    FUNCTION_NOT_ALLOWED = "function_not_allowed"
    AGENT_NOT_USABLE = "agent_not_usable"  #: the agent is disabled, or the caller lacks `use_agent`
    # the caller
    NOT_A_MEMBER = "not_a_member"  #: the caller is not a member of the tenant
    ROLE_TOO_LOW = "role_too_low"  #: a viewer (calling needs member or higher)
    #: the tool is restricted to grantees and the caller has no `use_tool`
    TOOL_NOT_USABLE = "tool_not_usable"
    VIEWER_MAY_NOT_CALL = "viewer_may_not_call"  #: a viewer's call through the MCP gateway
    # the gateway or a chat
    UNKNOWN_FUNCTION = "unknown_function"  #: the gateway or a chat: a name the agent does not offer


# The one mapping from a distinct cause to the family a call result reports (what clients have always branched on).
REASON_FAMILY: dict[Reason, ResultCode] = {
    Reason.TOOL_DISABLED: ResultCode.DISABLED,
    Reason.TOOL_PAUSED: ResultCode.DISABLED,
    Reason.FUNCTION_MISSING: ResultCode.NOT_FOUND,
    Reason.FUNCTION_CHANGED: ResultCode.DISABLED,
    Reason.FUNCTION_HELD: ResultCode.DISABLED,
    Reason.FUNCTION_DISABLED: ResultCode.DISABLED,
    Reason.FUNCTION_UNSUPPORTED: ResultCode.DISABLED,
    Reason.FUNCTION_NOT_ALLOWED: ResultCode.NOT_FOUND,
    Reason.AGENT_NOT_USABLE: ResultCode.DISABLED,
    Reason.NOT_A_MEMBER: ResultCode.DISABLED,
    Reason.ROLE_TOO_LOW: ResultCode.DISABLED,
    Reason.TOOL_NOT_USABLE: ResultCode.DISABLED,
    Reason.VIEWER_MAY_NOT_CALL: ResultCode.DISABLED,
    Reason.UNKNOWN_FUNCTION: ResultCode.NOT_FOUND,
}


def error_body(code: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    """The API's error envelope (`{"error": {code, message, details}}`); `code` is an ApiCode."""
    return {"error": {"code": str(code), "message": message, "details": details or {}}}
