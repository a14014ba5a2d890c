"""The mixed Toolhub workload: list tools, invoke a warm MCP tool, chat with the fake model, gateway tools/call.

Driven by bench/load/run.py, which passes the topology through the environment (LOAD_HOSTS, LOAD_TOKEN,
LOAD_TOKENS: one API token per member of the company, LOAD_TENANT, LOAD_TOOL_ID, LOAD_AGENT_ID). Users spread over the web processes in LOAD_HOSTS, as a load
balancer would. Every successful invoke's call_id is appended to LOAD_CALL_LOG so run.py can check that no
completed call lost its audit row; with LOAD_EVENT_LOG every request is written there (time, name, outcome,
class of failure, latency) so run.py can tell what happened around each fault.

LOAD_CHAT=0 leaves chat out (the ContextForge comparison: it has no agents to chat with). LOAD_TARGET=contextforge
runs the same list/invoke/gateway mix against IBM ContextForge instead (LOAD_CF_BASE, LOAD_CF_TOKEN, LOAD_CF_TOOL,
LOAD_CF_SERVER_URL): GET /tools, POST /rpc tools/call and tools/call on its virtual server's /mcp.
"""

from __future__ import annotations

import itertools
import json
import os
import time
from typing import Any

from locust import FastHttpUser, between, events

TARGET = os.environ.get("LOAD_TARGET", "toolhub")
CHAT = os.environ.get("LOAD_CHAT", "1") != "0"
HOSTS = os.environ["LOAD_HOSTS"].split(",")
# The company's members: each virtual user acts as one of them (round robin), with that member's own API token for
# the REST calls and the gateway (LOAD_TOKENS, comma-separated; LOAD_TOKEN alone when there is one member).
TOKENS = [t for t in os.environ.get("LOAD_TOKENS", os.environ.get("LOAD_TOKEN", "")).split(",") if t]
TENANT = os.environ["LOAD_TENANT"]
TOOL_ID = os.environ["LOAD_TOOL_ID"]
AGENT_ID = os.environ["LOAD_AGENT_ID"]
TOOL_NAME = os.environ.get("LOAD_TOOL_NAME", "")
CALL_LOG = open(os.environ["LOAD_CALL_LOG"], "a", buffering=1)
EVENT_LOG = open(os.environ["LOAD_EVENT_LOG"], "a", buffering=1 << 16) if os.environ.get("LOAD_EVENT_LOG") else None
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
               "MCP-Protocol-Version": "2025-06-18"}
_next_host = itertools.cycle(HOSTS)
_next_token = itertools.cycle(TOKENS or [""])


def classify(status: int, body: str, headers: Any) -> str:
    """A failure's class: `service_unavailable` (503 + Retry-After, the typed envelope), another typed error
    code, `connection` (no HTTP answer: refused or reset by a process that died), or `untyped` (a 500 page,
    a body that is not the error envelope: what the fault suite must never see)."""
    if status == 0:
        return "connection"
    try:
        data = json.loads(body)
    except ValueError:
        data = None
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict) and error.get("code"):
            code = str(error["code"])
            if status == 503 and not headers.get("Retry-After"):
                return f"{code} (no Retry-After)"
            return code
        if data.get("error_code"):
            return str(data["error_code"])
    return f"untyped {status}"


class _Client(FastHttpUser):
    """What both targets share: spreading over hosts, failure classes, the MCP client (initialize, calls)."""

    abstract = True
    wait_time = between(0, 0.05)
    host = HOSTS[0]
    # A request that takes longer than this is a hang, not a slow answer: it is cut and counted.
    network_timeout = float(os.environ.get("LOAD_TIMEOUT_S", "30"))
    connection_timeout = 5.0

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self.base = next(_next_host)
        self.token = next(_next_token)  # this user's member
        self.headers = {"Authorization": f"Token {self.token}", "X-Tenant": TENANT}
        self.mcp_session: str | None = None
        self.rpc_id = 0
        if TARGET == "contextforge":
            self.mcp_url = os.environ["LOAD_CF_SERVER_URL"]
            self.mcp_headers = {**MCP_HEADERS, "Authorization": f"Bearer {os.environ['LOAD_CF_TOKEN']}"}
        else:
            self.mcp_url = f"{self.base}/mcp/{TENANT}/agents/{AGENT_ID}/"
            self.mcp_headers = {**MCP_HEADERS, "Authorization": f"Bearer {self.token}"}

    def _fail(self, resp: Any, what: str = "") -> None:
        status = resp.status_code or 0
        cls = classify(status, resp.text or "" if status else "", resp.headers or {})
        resp.failure(f"{cls}|{status} {what or (resp.text or str(resp.error or ''))[:100]}")

    def _rpc(self, method: str, params: dict[str, Any], name: str) -> tuple[Any, dict[str, Any] | None]:
        self.rpc_id += 1
        headers = dict(self.mcp_headers)
        if self.mcp_session:
            headers["Mcp-Session-Id"] = self.mcp_session
        payload = {"jsonrpc": "2.0", "id": self.rpc_id, "method": method, "params": params}
        with self.client.post(self.mcp_url, headers=headers, json=payload, name=name, catch_response=True) as resp:
            message = None
            if resp.status_code == 200:
                text = resp.text or ""
                for line in text.splitlines():  # SSE: the answer is the `data:` line with our id
                    if line.startswith("data:"):
                        candidate = json.loads(line[5:])
                        if candidate.get("id") == self.rpc_id:
                            message = candidate
                if message is None and text.startswith("{"):
                    message = json.loads(text)
                if message is None or "error" in message:
                    data = ((message or {}).get("error") or {}).get("data")
                    typed = data.get("code") if isinstance(data, dict) else None
                    resp.failure(f"{f'{typed} (JSON-RPC)' if typed else 'mcp_error'}|200 {text[:100]}")
                    message = None
                elif message.get("result", {}).get("isError"):
                    # Delivered, but the tool's answer is an error result (a killed server, for example).
                    resp.failure(f"tool_error|200 {text[:100]}")
            elif resp.status_code == 404 and self.mcp_session:
                # The session is gone (its record was in Redis, or it idled out): a client starts a new one.
                self.mcp_session = None
                resp.failure("session_lost|404 MCP session no longer known; the client re-initializes")
            else:
                self._fail(resp)
            return resp, message

    def _initialize(self) -> bool:
        self.mcp_session = None
        resp, message = self._rpc("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                                 "clientInfo": {"name": "locust", "version": "1"}}, "MCP initialize")
        if message is None:
            return False
        self.mcp_session = (resp.headers or {}).get("mcp-session-id")
        headers = {**self.mcp_headers, **({"Mcp-Session-Id": self.mcp_session} if self.mcp_session else {})}
        self.client.post(self.mcp_url, headers=headers, name="MCP initialized",
                         json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        return True


class ToolhubUser(_Client):
    """Toolhub's API and gateway."""

    abstract = TARGET == "contextforge"  # Locust runs every concrete user class of the file: one per target

    def list_tools(self) -> None:
        with self.client.get(f"{self.base}/api/v1/tools/", headers=self.headers, name="GET /tools/",
                             catch_response=True) as resp:
            if resp.status_code != 200:
                self._fail(resp)

    def invoke(self) -> None:
        with self.client.post(f"{self.base}/api/v1/tools/{TOOL_ID}/invoke/", headers=self.headers, name="POST invoke",
                              json={"function": "get_inventory", "arguments": {"sku": "DEMO-001"}},
                              catch_response=True) as resp:
            body = resp.json() if resp.status_code == 200 else {}
            if body.get("success"):
                # A call that ran while PostgreSQL was away has no id yet: its spooled row is found by call_uid.
                spooled = body["call_id"] is None and (body.get("audit") or {}).get("call_uid")
                CALL_LOG.write(f"uid:{spooled}\n" if spooled else f"{body['call_id']}\n")
                resp.success()
            elif resp.status_code == 200:
                resp.failure(f"{body.get('error_code')}|200 {str(body.get('error'))[:100]}")
            else:
                self._fail(resp)

    def chat(self) -> None:
        with self.client.post(f"{self.base}/api/v1/agents/{AGENT_ID}/chat/", headers=self.headers, name="POST chat",
                              json={"message": "How many DEMO-001 are in stock?"}, catch_response=True) as resp:
            if resp.status_code != 200:
                self._fail(resp)

    def gateway_call(self) -> None:
        if not TOOL_NAME or (self.mcp_session is None and not self._initialize()):
            return
        self._rpc("tools/call", {"name": f"{TOOL_NAME}__get_inventory", "arguments": {"sku": "DEMO-001"}},
                  "MCP tools/call")

    # The mix: 3 listings, 6 invokes, 2 gateway calls and (unless LOAD_CHAT=0) 1 chat turn in 12 requests.
    tasks = {list_tools: 3, invoke: 6, gateway_call: 2, **({chat: 1} if CHAT else {})}


class ContextForgeUser(_Client):
    """The same mix against ContextForge: its REST tool list, its JSON-RPC tools/call and its virtual server."""

    initialized: bool  # the virtual server's MCP session was set up (set in __init__)

    def list_tools(self) -> None:
        with self.client.get(f"{CF_BASE}/tools", headers=CF_HEADERS, name="GET /tools/", catch_response=True) as resp:
            if resp.status_code != 200:
                self._fail(resp)

    def invoke(self) -> None:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": CF_TOOL, "arguments": {"sku": "DEMO-001"}}}
        with self.client.post(f"{CF_BASE}/rpc", headers=CF_HEADERS, json=body, name="POST invoke",
                              catch_response=True) as resp:
            data = resp.json() if resp.status_code == 200 else {}
            result = data.get("result") if isinstance(data, dict) else None
            if not isinstance(result, dict) or result.get("isError"):
                resp.failure(f"{'tool_error' if result else 'rpc_error'}|{resp.status_code} {(resp.text or '')[:100]}")

    def gateway_call(self) -> None:
        if self.mcp_session is None and not self.initialized and not self._initialize():
            return
        self.initialized = True
        self._rpc("tools/call", {"name": CF_TOOL, "arguments": {"sku": "DEMO-001"}}, "MCP tools/call")

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self.initialized = False

    tasks = {list_tools: 3, invoke: 6, gateway_call: 2}
    abstract = TARGET != "contextforge"


if TARGET == "contextforge":
    CF_BASE = os.environ["LOAD_CF_BASE"]
    CF_TOOL = os.environ["LOAD_CF_TOOL"]
    CF_HEADERS = {"Authorization": f"Bearer {os.environ['LOAD_CF_TOKEN']}"}


@events.request.add_listener
def _record(request_type: str, name: str, response_time: float, response_length: int, exception: Any = None,
            response: Any = None, **kwargs: Any) -> None:
    if EVENT_LOG is None:
        return
    outcome, detail = "ok", ""
    if exception is not None:
        outcome, _, detail = str(exception).partition("|")
        if "|" not in str(exception):
            status = getattr(response, "status_code", 0) or 0
            outcome = "timeout" if "timed out" in str(exception).lower() or "Timeout" in type(exception).__name__ \
                else ("connection" if not status else f"untyped {status}")
    # The failure's text last (what run.py prints for the failures a fault report singles out).
    detail = " ".join((detail or (str(exception) if exception is not None else "")).split())[:200]
    EVENT_LOG.write(f"{time.time():.3f}\t{name}\t{outcome}\t{response_time:.1f}\t{detail}\n")


@events.quitting.add_listener
def _close(environment: object, **kwargs: object) -> None:
    CALL_LOG.close()
    if EVENT_LOG is not None:
        EVENT_LOG.close()
