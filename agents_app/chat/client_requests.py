"""The requests an MCP server sends back during a chat's call (sampling, elicitation), answered through the chat.

In a streamed chat each is held as an approval for the chat's user; elsewhere it is declined with the reason.
tools_app.runtime.mcp.client_requests carries them from the server to here.
"""

from __future__ import annotations

from typing import Any

from django.db import connections

from agents_app.chat.state import RunState
from agents_app.runtime.model_client import ModelError
from agents_app.runtime.model_client import sample as sample_with_model
from tools_app.models import ApprovalStatus, Tool
from tools_app.runtime.mcp.client_requests import ClientRequestRefused, ClientRequests
from tools_app.services.client_request_holds import client_request_hold, client_request_wait
from tools_app.wiring.http import guarded_http_client
from tools_app.wiring.specs import server_spec

NOT_STREAMED = ("declined: this chat is not streamed, so nobody sees the server's {what} while the call waits; "
                "chat with \"stream\": true to answer such requests")


def client_requests_for(run: RunState, fn: Any, notify: Any) -> ClientRequests:
    """How the server's own requests during this call are answered (see tools_app.runtime.mcp.client_requests).

    In a streamed chat each is held as an approval for the chat's user (the one approval rule and API): a
    `sampling.required` or `elicitation.required` event shows it, the call waits for the decision (at most
    the tool's call timeout), and then sampling is answered by the agent's own model and an elicitation by
    the user's answer. Elsewhere both are declined with the reason.
    """
    if not run.interactive or notify is None:
        return ClientRequests(no_sample=NOT_STREAMED.format(what="sampling request"),
                              no_elicit=NOT_STREAMED.format(what="question"))
    scrub = run.scrub

    def hold(kind: str, question: dict[str, Any], shown: dict[str, Any]) -> tuple[str, dict[str, Any] | None]:
        try:
            tool = Tool.objects.get(tenant=run.tenant, pk=fn.tool_id)
            wait_s = float(server_spec(tool, run.actor).call_timeout_s)
            approval = client_request_hold(tenant=run.tenant, actor=run.actor, tool=tool, function=fn.function,
                                           kind=kind, question=question, agent=run.agent,
                                           conversation=run.conversation, wait_s=wait_s)
            notify(f"{kind}.required", scrub.value({"approval_id": approval.pk, "safety": fn.safety, **shown,
                                                     "expires_at": approval.expires_at.isoformat()}))
            return client_request_wait(tenant=run.tenant, approval_id=approval.pk, wait_s=wait_s)
        finally:
            connections.close_all()  # runs on a pool worker thread: it must not keep a connection

    def sample(params: dict[str, Any]) -> dict[str, Any]:
        status, _ = hold("sampling", params, {"messages": params.get("messages") or [],
                                              "system_prompt": params.get("systemPrompt"),
                                              "max_tokens": params.get("maxTokens")})
        if status != ApprovalStatus.APPROVED:
            raise ClientRequestRefused(f"declined: the chat's user did not approve the sampling request ({status})")
        try:
            return sample_with_model(run.model, params,
                                     http_client=guarded_http_client() if run.guard_model_url else None)
        except ModelError as exc:
            raise ClientRequestRefused(f"the agent's model failed: {exc.message}") from None

    def elicit(params: dict[str, Any]) -> dict[str, Any]:
        shown = {"message": params.get("message") or "", "mode": params.get("mode") or "form",
                 "requested_schema": params.get("requestedSchema"), "url": params.get("url")}
        status, answer = hold("elicitation", params, shown)
        if status == ApprovalStatus.APPROVED:
            return {"action": "accept", "content": answer or {}} if shown["mode"] == "form" else {"action": "accept"}
        return {"action": "decline" if status == ApprovalStatus.DENIED else "cancel"}

    return ClientRequests(sample=sample, elicit=elicit)


