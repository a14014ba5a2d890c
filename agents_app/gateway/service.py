"""The gateway's Django side, as the ASGI layer sees it: who is calling (`principal`), which functions the agent
offers them (`listing`), calls through invoke (`calls`), and the agent's servers' prompts and resources
(`upstream`).

Everything here is synchronous ORM work; the ASGI layer runs it in worker threads. The toolset is the one chat
builds (agents_app.toolsets.build_toolset) and every call goes through `tool_invoke`, so the rules that hold for
chat (tenant scoping, CHANGED/disabled functions, breaker, argument validation, audit, scrubbing) hold here too.
"""

from __future__ import annotations

from agents_app.gateway.calls import (
    AUTHORIZE_URL,
    CONNECTIONS_URL,
    HANDED_OVER,
    VIA,
    BaseUrl,
    CallOutcome,
    Refusal,
    call_function,
    decide_and_run,
    decided_in_toolhub_only,
    held_outcome,
    self_approval_allowed,
    throttle,
)
from agents_app.gateway.listing import (
    GatewayFunction,
    Listing,
    fingerprint,
    fingerprint_of,
    list_functions,
    listing,
    redacted_arguments,
    secrets_of,
)
from agents_app.gateway.principal import (
    Principal,
    authenticate,
    authenticate_remembering,
    refresh,
    remembered_principal,
    resolve,
    shared_cache_is_local,
    user_for_token,
)
from agents_app.gateway.upstream import (
    CALL,
    PROMPT_GET,
    RESOURCE_READ,
    RESOURCE_SCHEME,
    get_prompt,
    list_prompts,
    list_resources,
    read_resource,
)
from core.errors import NotFound

__all__ = [
    "CALL", "AUTHORIZE_URL", "CONNECTIONS_URL", "HANDED_OVER", "PROMPT_GET", "RESOURCE_READ", "RESOURCE_SCHEME", "VIA", "BaseUrl", "CallOutcome", "GatewayFunction",
    "Listing", "NotFound", "Principal", "Refusal", "authenticate", "authenticate_remembering", "call_function",
    "decide_and_run", "decided_in_toolhub_only", "held_outcome", "fingerprint", "fingerprint_of", "get_prompt", "list_functions",
    "list_prompts", "list_resources", "listing", "read_resource", "redacted_arguments", "refresh",
    "remembered_principal", "resolve", "secrets_of", "self_approval_allowed", "shared_cache_is_local", "throttle",
    "user_for_token",
]
