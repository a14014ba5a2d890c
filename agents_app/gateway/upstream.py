"""The agent's MCP servers' prompts and resources, proxied under the rules of a tool call (audited, throttled)."""

from __future__ import annotations

import json
import logging
import time
from typing import Any
from urllib.parse import quote, unquote

from agents_app.gateway.calls import VIA, Refusal, throttle
from agents_app.gateway.listing import list_functions
from agents_app.gateway.principal import Principal
from agents_app.runtime.toolset import qualify
from core.codes import ApiCode, Reason
from core.errors import NotFound
from core.secrets import scrub_text
from tools_app import selectors
from tools_app.configs import secret_values
from tools_app.models import (
    CallStatus,
    Tool,
    ToolCall,
    ToolType,
)
from tools_app.runtime import result as codes
from tools_app.runtime.mcp.client_requests import (
    INPUT_REQUIRED,
    ClientRequests,
    InputHandedBack,
    InputStateStale,
)
from tools_app.runtime.result import ToolResult
from tools_app.runtime.screen.results import META_KEY, screened_answer
from tools_app.services import screening
from tools_app.services.approval_gate import needs_approval
from tools_app.services.audit import audit, resumed, settle, through_client
from tools_app.wiring.pool import pool
from tools_app.wiring.specs import server_spec

logger = logging.getLogger(__name__)


# --- prompts and resources of the agent's MCP tools (namespaced like functions, under the same rules) -----

RESOURCE_SCHEME = "toolhub"
# The audit rows' function names for a prompt get and a resource read: an MCP tool name cannot contain "/".
PROMPT_GET = "prompts/get"
RESOURCE_READ = "resources/read"


def _mcp_tools(principal: Principal) -> list[Tool]:
    """The agent's MCP tools that offer this user at least one function (so usable, enabled, not backed off)."""
    ids = {f.function.tool_id for f in list_functions(principal)}
    return list(Tool.objects.filter(tenant=principal.tenant, pk__in=ids, type__in=(ToolType.LOCAL, ToolType.REMOTE))
                .order_by("name"))


def _from_each(principal: Principal, op: Any) -> list[tuple[Tool, Any]]:
    out = []
    for tool in _mcp_tools(principal):
        try:
            out.append((tool, pool().session_request(server_spec(tool, principal.user), op)))
        except Exception as exc:  # noqa: BLE001 - a server without prompts/resources (or down) offers none
            logger.info("gateway: %s offers no listing: %s", tool.name, type(exc).__name__)
    return out


def _dump(model: Any, secrets: list[str]) -> dict[str, Any]:
    raw = json.dumps(model.model_dump(by_alias=True, mode="json", exclude_none=True))
    loaded: dict[str, Any] = json.loads(scrub_text(raw, secrets) if secrets else raw)
    return loaded


CALL = "call"  # beside INPUT_REQUIRED in a round handed back: the audit row of the request (awaiting input)


def _upstream(principal: Principal, tool: Tool, function: str, arguments: dict[str, Any], op: Any,
              title: str, client_requests: ClientRequests | None = None, continuing: int | None = None
              ) -> dict[str, Any]:
    """A prompt get or resource read under the rules of a tool call: the caller may call (not a viewer), the
    approval rule (tool, link, safety) does not hold it, the throttle has room; audited whatever happens.

    `op(session, input_responses, request_state)` sends it. With `client_requests` the server's questions during
    it (a 2025 server's requests, a 2026 server's input_required rounds) go to the gateway's client as a tool
    call's do; without, a 2025 server's are declined and a 2026 server's question fails the request. With stateless
    rounds (`client_requests.stateless`, a 2026 gateway client) a 2026 server's questions end it: the answer is
    `{INPUT_REQUIRED: ..., CALL: its audit row}` (agents_app.gateway.relay.hand_back makes the client's input request
    of it). `continuing` names that row when a retry answers such a round: the request was throttled and audited when
    it began, so the round is not throttled again and settles the same row (as a tool call's, invoke `continuing`)."""
    with through_client(principal.client):
        return _audited_upstream(principal, tool, function, arguments, op, title, client_requests, continuing)


def _send(principal: Principal, tool: Tool, op: Any, what: str, client_requests: ClientRequests | None) -> Any:
    spec = server_spec(tool, principal.user)
    if client_requests is None:
        async def once(session: Any) -> Any:
            return await op(session, None, None)

        return pool().session_request(spec, once)
    return pool().asking_request(spec, op, client_requests, what)


def _audited_upstream(principal: Principal, tool: Tool, function: str, arguments: dict[str, Any], op: Any,
                      title: str, client_requests: ClientRequests | None, continuing: int | None) -> dict[str, Any]:
    secrets = secret_values(tool.type, tool.config) + selectors.live_secret_values(tenant=principal.tenant, tool=tool)
    row = None if continuing is None else resumed(pk=continuing, tenant=principal.tenant, tool=tool,
                                                  function=function, actor=principal.user)

    def write(result: ToolResult, status: str) -> ToolCall:
        if row is not None:
            return settle(row, result, status, secrets)
        return audit(tenant=principal.tenant, actor=principal.user, tool=tool, function=function, arguments=arguments,
                     result=result, status=status, secrets=secrets, agent=principal.agent, via=VIA, title=title)

    def refuse(result: ToolResult, wire_code: ApiCode, **details: Any) -> Refusal:
        write(result, CallStatus.DENIED)
        reason = {"reason": result.error_reason} if result.error_reason else {}  # the distinct cause (core.codes.Reason)
        return Refusal(wire_code, result.error or "", **reason, **details)

    if not principal.may_call:
        raise refuse(ToolResult.refused(Reason.VIEWER_MAY_NOT_CALL,
                                        f"viewers may list this agent's prompts and resources but not use them "
                                        f"(you are {principal.role.value})"), ApiCode.PERMISSION_DENIED)
    link = principal.agent.agent_tools.filter(tool=tool).first()
    if needs_approval(tool, None, link.requires_approval if link is not None else None):
        # A held call runs its function once approved; a prompt or resource has none to run, so it is refused.
        raise refuse(ToolResult.fail(
            codes.APPROVAL_REQUIRED,
            f"{tool.name} needs a person's approval for every use, and a prompt or resource cannot be "
            "held for one: use the tool's functions (their calls are held for approval) or ask an admin "
            "to lift the tool's requires_approval"), ApiCode.APPROVAL_REQUIRED, tool=tool.name)
    if row is None:
        throttle(principal)
    started = time.monotonic()
    try:
        answer = _dump(_send(principal, tool, op, title, client_requests), secrets)
    except InputHandedBack as exc:
        # A 2026 server asked (stateless rounds): its questions go to the client, the answer comes with its retry.
        asked = ToolResult.ok(text=f"{tool.name} asked for input ({len(exc.payload['requests'])} question(s), "
                                   f"round {exc.payload['rounds']}); handed to the caller, who answers by asking again")
        asked.cost_ms = int((time.monotonic() - started) * 1000)
        return {INPUT_REQUIRED: exc.payload, CALL: write(asked, CallStatus.AWAITING_INPUT).pk}
    except InputStateStale as exc:
        raise refuse(ToolResult.fail(codes.BUSINESS_ERROR, exc.message), ApiCode.INVALID_REQUEST_STATE,
                     reason="tool_changed") from None
    except Exception as exc:  # noqa: BLE001 - the server's failure is the caller's answer, typed and audited
        message = scrub_text(str(getattr(exc, "message", "") or type(exc).__name__), secrets)[:500]
        failed = ToolResult.fail(codes.EXECUTION_ERROR, message)
        failed.cost_ms = int((time.monotonic() - started) * 1000)
        write(failed, CallStatus.ERROR)
        raise Refusal(ApiCode.UPSTREAM_ERROR, f"{tool.name} answered an error: {message}", tool=tool.name) from None
    # Invisible characters out of what the model reads, injection markers named in `_meta` and the audit row.
    markers = screened_answer(answer)
    done = ToolResult.ok(text=json.dumps(answer, ensure_ascii=False))
    if markers:
        done.meta[META_KEY] = {"flagged": True, "markers": markers}
    done.cost_ms = int((time.monotonic() - started) * 1000)
    write(done, CallStatus.OK)
    return answer


def list_prompts(principal: Principal) -> list[dict[str, Any]]:
    async def op(session: Any) -> Any:
        return await session.list_prompts()

    prompts = []
    for tool, listed in _from_each(principal, op):
        items = [_dump(prompt, secret_values(tool.type, tool.config)) for prompt in listed.prompts]
        for item in screening.offered_items(tool, "prompts", items):  # held by the screen: not offered
            item["name"] = qualify(tool.name, item["name"])
            prompts.append(item)
    return prompts


def _split(principal: Principal, qualified: str) -> tuple[Tool, str]:
    for tool in _mcp_tools(principal):
        prefix = qualify(tool.name, "")
        if qualified.startswith(prefix):
            return tool, qualified[len(prefix):]
    raise NotFound()


def _held(principal: Principal, tool: Tool, kind: str, key: str, value: str) -> bool:
    """The prompt or resource named is one the screen holds (left out of the listing): a client that asks for it
    by name anyway is told it does not exist. Looked up in the server's listing now (a get or read is rare)."""
    if screening.policy_of(principal.tenant) != screening.HOLD:
        return False

    async def op(session: Any) -> Any:
        return await (session.list_prompts() if kind == "prompts" else session.list_resources())

    try:
        listed = pool().session_request(server_spec(tool, principal.user), op)
    except Exception:  # noqa: BLE001 - no listing, nothing the screen could hold
        return False
    secrets = secret_values(tool.type, tool.config)
    items = [_dump(item, secrets) for item in getattr(listed, kind)]
    named = [item for item in items if str(item.get(key)) == value]
    return bool(named) and not screening.offered_items(tool, kind, named)


def get_prompt(principal: Principal, name: str, arguments: dict[str, str] | None,
               client_requests: ClientRequests | None = None, continuing: int | None = None) -> dict[str, Any]:
    tool, original = _split(principal, name)
    if _held(principal, tool, "prompts", "name", original):
        raise NotFound()

    async def op(session: Any, responses: Any, state: str | None) -> Any:
        return await session.get_prompt(original, arguments or {}, input_responses=responses, request_state=state,
                                        allow_input_required=True)

    return _upstream(principal, tool, PROMPT_GET, {"name": original, "arguments": dict(arguments or {})}, op,
                     f"{tool.name}: prompt {original}"[:200], client_requests, continuing)


def _resource_uri(tool: Tool, uri: str) -> str:
    return f"{RESOURCE_SCHEME}://{tool.name}/{quote(uri, safe='')}"


def list_resources(principal: Principal) -> list[dict[str, Any]]:
    async def op(session: Any) -> Any:
        return await session.list_resources()

    resources = []
    for tool, listed in _from_each(principal, op):
        items = [_dump(resource, secret_values(tool.type, tool.config)) for resource in listed.resources]
        for item in screening.offered_items(tool, "resources", items):  # held by the screen: not offered
            item["uri"] = _resource_uri(tool, str(item["uri"]))
            item["name"] = qualify(tool.name, item["name"])
            resources.append(item)
    return resources


def read_resource(principal: Principal, uri: str, client_requests: ClientRequests | None = None,
                  continuing: int | None = None) -> dict[str, Any]:
    prefix = f"{RESOURCE_SCHEME}://"
    if not uri.startswith(prefix) or "/" not in uri[len(prefix):]:
        raise NotFound()
    tool_name, encoded = uri[len(prefix):].split("/", 1)
    tool = next((t for t in _mcp_tools(principal) if t.name == tool_name), None)
    if tool is None:
        raise NotFound()
    original = unquote(encoded)
    if _held(principal, tool, "resources", "uri", original):
        raise NotFound()

    async def op(session: Any, responses: Any, state: str | None) -> Any:
        return await session.read_resource(original, input_responses=responses, request_state=state,
                                           allow_input_required=True)

    result = _upstream(principal, tool, RESOURCE_READ, {"uri": original}, op, f"{tool.name}: {original}"[:200],
                       client_requests, continuing)
    for item in result.get("contents", []):  # none in a round handed back (INPUT_REQUIRED)
        item["uri"] = uri if item.get("uri") == original else _resource_uri(tool, str(item.get("uri", "")))
    return result
