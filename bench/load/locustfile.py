"""The mixed Toolhub workload: list tools, invoke a warm MCP tool, chat with the fake model.

Driven by bench/load/run.py, which passes the topology through the environment (LOAD_HOSTS, LOAD_TOKEN,
LOAD_TENANT, LOAD_TOOL_ID, LOAD_AGENT_ID). Users spread over the web processes in LOAD_HOSTS, as a load
balancer would. Every successful invoke's call_id is appended to LOAD_CALL_LOG so run.py can check that no
completed call lost its audit row.
"""

from __future__ import annotations

import itertools
import os

from locust import FastHttpUser, between, events, task

HOSTS = os.environ["LOAD_HOSTS"].split(",")
HEADERS = {"Authorization": f"Token {os.environ['LOAD_TOKEN']}", "X-Tenant": os.environ["LOAD_TENANT"]}
TOOL_ID = os.environ["LOAD_TOOL_ID"]
AGENT_ID = os.environ["LOAD_AGENT_ID"]
CALL_LOG = open(os.environ["LOAD_CALL_LOG"], "a", buffering=1)  # noqa: SIM115 (lives as long as the run)
_next_host = itertools.cycle(HOSTS)


class ToolhubUser(FastHttpUser):
    wait_time = between(0, 0.05)
    host = HOSTS[0]

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.base = next(_next_host)

    @task(3)
    def list_tools(self) -> None:
        self.client.get(f"{self.base}/api/v1/tools/", headers=HEADERS, name="GET /tools/")

    @task(6)
    def invoke(self) -> None:
        with self.client.post(f"{self.base}/api/v1/tools/{TOOL_ID}/invoke/", headers=HEADERS, name="POST invoke",
                              json={"function": "get_inventory", "arguments": {"sku": "DEMO-001"}},
                              catch_response=True) as resp:
            body = resp.json() if resp.status_code == 200 else {}
            if body.get("success"):
                CALL_LOG.write(f"{body['call_id']}\n")
                resp.success()
            else:
                resp.failure(f"{resp.status_code} {str(body.get('error_code') or resp.text)[:120]}")

    @task(1)
    def chat(self) -> None:
        with self.client.post(f"{self.base}/api/v1/agents/{AGENT_ID}/chat/", headers=HEADERS, name="POST chat",
                              json={"message": "How many DEMO-001 are in stock?"}, catch_response=True) as resp:
            if resp.status_code != 200:
                resp.failure(f"{resp.status_code} {resp.text[:120]}")


@events.quitting.add_listener
def _close(environment: object, **kwargs: object) -> None:
    CALL_LOG.close()
