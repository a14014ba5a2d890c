"""Tenant A of the quota phase (bench/load/quotas.py): users hammering one tool past its quota over both web processes.

Driven by bench/load/quotas.py through the environment: LOAD_HOSTS (both web processes; users alternate between
them, as behind a load balancer), LOAD_TOKENS (tenant A's members, one API token each), LOAD_TENANT, LOAD_TOOL_ID,
LOAD_AGENT_ID, LOAD_TOOL_NAME. Per 6 requests a user sends 5 `POST /tools/{id}/invoke/` and 1 gateway `tools/call`
of the same tool (both count against the same quota), with no wait between requests; with LOAD_SPREAD_TOOLS (the LOCAL
tools of tenant C, LOAD_SPREAD_TENANT, called with its owner's LOAD_SPREAD_TOKEN) 3 more invokes of one of those, so
that C holds as many runner server slots as its share allows. QUOTA_POLITE=1 makes a user
sleep what a refusal's Retry-After (or, in the gateway, `details.retry_after`) says, as a well-behaved client would;
by default it ignores it and hammers.

Every answer is one line of QUOTA_EVENT_LOG (tab-separated): the time it came, `invoke` or `gateway`, the HTTP status,
the outcome (`ok`, the typed error code, `untyped`), the refused limit (`per_minute`, `concurrent`, ...), the
Retry-After it carried (empty when none), the latency in ms. quotas.py judges the refusals from it; what was admitted
it counts on the server (audit rows and Redis counters), never from here.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import time
from typing import Any

import gevent
from locust import FastHttpUser, constant, events, task

HOSTS = os.environ["LOAD_HOSTS"].split(",")
TOKENS = [t for t in os.environ["LOAD_TOKENS"].split(",") if t]
TENANT = os.environ["LOAD_TENANT"]
TOOL_ID = os.environ["LOAD_TOOL_ID"]
AGENT_ID = os.environ["LOAD_AGENT_ID"]
TOOL_NAME = os.environ["LOAD_TOOL_NAME"]
POLITE = os.environ.get("QUOTA_POLITE", "0") == "1"
# Tenant C's LOCAL tools (ids): hammered too, so that C holds as many of the runners' server slots as its fair share
# lets it (bench/load/quotas.py); empty: none.
SPREAD = [t for t in os.environ.get("LOAD_SPREAD_TOOLS", "").split(",") if t]
SPREAD_HEADERS = {"Authorization": f"Token {os.environ.get('LOAD_SPREAD_TOKEN', '')}",
                  "X-Tenant": os.environ.get("LOAD_SPREAD_TENANT", "")}
LOG = open(os.environ["QUOTA_EVENT_LOG"], "a", buffering=1)
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
               "MCP-Protocol-Version": "2025-06-18"}
REFUSAL_META = "toolhub/refusal"
_next_host = itertools.cycle(HOSTS)
_next_token = itertools.cycle(TOKENS)


def _record(kind: str, status: int, outcome: str, limit: str, retry_after: str, started: float) -> None:
    LOG.write(f"{time.time():.3f}\t{kind}\t{status}\t{outcome}\t{limit}\t{retry_after}\t"
              f"{(time.monotonic() - started) * 1000:.1f}\n")


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _answer(resp: Any) -> tuple[int, dict[str, Any]]:
    """An invoke's HTTP status (0: no answer) and its JSON body ({} when there is none or it is not an object)."""
    status = resp.status_code or 0
    body = _json(resp.text or "") if status else None
    return status, body if isinstance(body, dict) else {}


def _retry_after(resp: Any) -> str:
    return str((resp.headers or {}).get("Retry-After") or "")


def _gateway_code(typed: dict[str, Any], result: dict[str, Any]) -> str:
    """A gateway error result's outcome: its typed code, or `capacity_exceeded` when a runner's fair share refused
    the server (typed EXECUTION_ERROR: named, not lumped with the tool's own errors)."""
    code = str(typed.get("error_code") or "tool_error")
    if code != "QUOTA_EXCEEDED" and "capacity_exceeded" in json.dumps(result.get("content") or []):
        return "capacity_exceeded"
    return code


class TenantA(FastHttpUser):
    wait_time = constant(0)
    host = HOSTS[0]
    network_timeout = 30.0
    connection_timeout = 5.0

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self.base = next(_next_host)
        token = next(_next_token)
        self.headers = {"Authorization": f"Token {token}", "X-Tenant": TENANT}
        self.mcp_url = f"{self.base}/mcp/{TENANT}/agents/{AGENT_ID}/"
        self.mcp_headers = {**MCP_HEADERS, "Authorization": f"Bearer {token}"}
        self.session: str | None = None
        self.rpc_id = 0

    def _backoff(self, seconds: str) -> None:
        if POLITE and seconds:
            gevent.sleep(min(float(seconds), 60.0))

    @task(5)
    def invoke(self) -> None:
        started = time.monotonic()
        with self.client.post(f"{self.base}/api/v1/tools/{TOOL_ID}/invoke/", headers=self.headers, name="A invoke",
                              json={"function": "get_inventory", "arguments": {"sku": "DEMO-001"}},
                              catch_response=True) as resp:
            status, body = _answer(resp)
            retry_after = _retry_after(resp)
            if status == 200 and body.get("success"):
                _record("invoke", status, "ok", "", "", started)
                resp.success()
                return
            error, details = body.get("error"), body.get("details")
            code = str(body.get("error_code") or (error.get("code") if isinstance(error, dict) else "") or "")
            code = code or ("connection" if not status else "untyped")
            if "capacity_exceeded" in str(error or ""):  # a runner's fair share refused the server (ResultCode
                code = "capacity_exceeded"               # EXECUTION_ERROR): named, not lumped with the tool's errors
            limit = str(details.get("limit") or "") if isinstance(details, dict) else ""
            _record("invoke", status, code, limit, retry_after, started)
            # A refusal is the expected answer here: counted in the event log, not as a Locust failure.
            if code == "QUOTA_EXCEEDED":
                resp.success()
                self._backoff(retry_after)
            else:
                resp.failure(f"{code}|{status}")

    @task(3)
    def local(self) -> None:
        """An invoke of one of tenant C's LOCAL tools: `ok`, QUOTA_EXCEEDED (their concurrent quota) or
        `capacity_exceeded` (the runner's fair share of server slots refused C a new server)."""
        if not SPREAD:
            return
        started = time.monotonic()
        tool = random.choice(SPREAD)
        with self.client.post(f"{self.base}/api/v1/tools/{tool}/invoke/", headers=SPREAD_HEADERS, name="C local",
                              json={"function": "get_inventory", "arguments": {"sku": "DEMO-001"}},
                              catch_response=True) as resp:
            status, body = _answer(resp)
            if status == 200 and body.get("success"):
                outcome = "ok"
            elif "capacity_exceeded" in str(body.get("error") or ""):
                outcome = "capacity_exceeded"
            else:
                outcome = str(body.get("error_code") or ("connection" if not status else "untyped"))
            _record("local", status, outcome, "", _retry_after(resp), started)
            resp.success()

    def _rpc(self, method: str, params: dict[str, Any]) -> tuple[int, dict[str, Any] | None, Any]:
        self.rpc_id += 1
        headers = {**self.mcp_headers, **({"Mcp-Session-Id": self.session} if self.session else {})}
        payload = {"jsonrpc": "2.0", "id": self.rpc_id, "method": method, "params": params}
        with self.client.post(self.mcp_url, headers=headers, json=payload, name=f"A MCP {method}",
                              catch_response=True) as resp:
            message = None
            if resp.status_code == 200:
                text = resp.text or ""
                for line in text.splitlines():  # SSE: the answer is the `data:` line with our id
                    if line.startswith("data:"):
                        candidate = _json(line[5:])
                        if isinstance(candidate, dict) and candidate.get("id") == self.rpc_id:
                            message = candidate
                if message is None and text.startswith("{"):
                    message = _json(text)
            resp.success()
            return resp.status_code or 0, message, resp.headers or {}

    @task(1)
    def gateway(self) -> None:
        if self.session is None:
            status, message, headers = self._rpc("initialize", {
                "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "quota-a", "version": "1"}})
            if message is None or "error" in message:
                return
            self.session = headers.get("mcp-session-id")
            self.client.post(self.mcp_url, name="A MCP initialized", json={"jsonrpc": "2.0",
                             "method": "notifications/initialized"},
                             headers={**self.mcp_headers, **({"Mcp-Session-Id": self.session} if self.session else {})})
        started = time.monotonic()
        status, message, _ = self._rpc("tools/call", {"name": f"{TOOL_NAME}__get_inventory",
                                                      "arguments": {"sku": "DEMO-001"}})
        if status == 404:
            self.session = None
        result = (message or {}).get("result") if isinstance(message, dict) else None
        if not isinstance(result, dict):
            _record("gateway", status, "untyped" if status else "connection", "", "", started)
            return
        if not result.get("isError"):
            _record("gateway", status, "ok", "", "", started)
            return
        typed = (result.get("_meta") or {}).get(REFUSAL_META) or {}
        details = typed.get("details") or {}
        retry_after = str(details.get("retry_after") or "")
        _record("gateway", status, _gateway_code(typed, result), str(details.get("limit") or ""), retry_after, started)
        if typed.get("error_code") == "QUOTA_EXCEEDED":
            self._backoff(retry_after)


@events.quitting.add_listener
def _close(environment: object, **kwargs: object) -> None:
    LOG.close()
