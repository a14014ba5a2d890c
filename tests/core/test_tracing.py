"""OpenTelemetry traces: exported over OTLP/HTTP to a real receiver on loopback; nothing at all without one."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.core.exceptions import MiddlewareNotUsed
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from core import tracing
from core.http_tracing import TracingMiddleware


class Receiver:
    """A tiny OTLP/HTTP trace receiver (what a collector listens with on :4318), protobuf bodies."""

    def __init__(self) -> None:
        self.spans: list[dict[str, Any]] = []
        self.requests = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                assert self.path == "/v1/traces" and self.headers["Content-Type"] == "application/x-protobuf"
                outer.collect(ExportTraceServiceRequest.FromString(body))
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def collect(self, request: ExportTraceServiceRequest) -> None:
        self.requests += 1
        for resource_spans in request.resource_spans:
            service = next((a.value.string_value for a in resource_spans.resource.attributes
                            if a.key == "service.name"), "")
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    attributes = {}
                    for a in span.attributes:
                        value = a.value
                        attributes[a.key] = getattr(value, value.WhichOneof("value"))
                    self.spans.append({"name": span.name, "trace_id": span.trace_id.hex(),
                                       "start": span.start_time_unix_nano, "end": span.end_time_unix_nano,
                                       "span_id": span.span_id.hex(), "parent": span.parent_span_id.hex(),
                                       "kind": span.kind, "attributes": attributes, "service": service,
                                       "status": span.status.code})

    def named(self, prefix: str) -> list[dict[str, Any]]:
        return [s for s in self.spans if s["name"].startswith(prefix)]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    one = Receiver()
    one.thread.start()
    try:
        assert tracing.configure(f"{one.url}/v1/traces", service_name="toolhub-test", install_global=False)
        yield one
    finally:
        tracing.shutdown()
        one.server.shutdown()
        one.server.server_close()


def exported(receiver: Receiver) -> list[dict[str, Any]]:
    assert tracing.flush()
    return receiver.spans


def test_off_without_an_endpoint_costs_nothing(monkeypatch: Any) -> None:
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    assert tracing.configure() is False and not tracing.enabled()
    assert tracing.span("a") is tracing.span("b")  # one shared no-op: no object, no SDK call per hook
    assert tracing.extract({"traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"}) is None
    with pytest.raises(MiddlewareNotUsed):
        TracingMiddleware(lambda request: None)  # type: ignore[arg-type,return-value]


def test_endpoints_follow_the_standard_variables() -> None:
    assert tracing.endpoint_from_env({}) == ""
    assert tracing.endpoint_from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318/"}) == "http://c:4318/v1/traces"
    assert tracing.endpoint_from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318",
                                      "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t:1/x"}) == "http://t:1/x"


@pytest.mark.django_db(transaction=True)
def test_an_invoke_is_one_trace_request_invoke_and_mcp_call(receiver: Receiver, api: Any) -> None:
    from tests.agents_app.support import inventory_tool
    from tools_app.wiring.pool import pool

    try:
        tool_id = inventory_tool(api)
        parent_trace = "4bf92f3577b34da6a3ce929d0e0e4736"
        resp = api.post(f"/api/v1/tools/{tool_id}/invoke/", {"function": "get_inventory",
                                                              "arguments": {"sku": "DEMO-001"}}, format="json",
                        HTTP_TRACEPARENT=f"00-{parent_trace}-00f067aa0ba902b7-01")
        assert resp.status_code == 200 and resp.json()["success"], resp.content
    finally:
        pool().close_all()
    spans = exported(receiver)
    [request] = [s for s in spans if s["kind"] == 2 and s["name"].endswith("/invoke/")]  # 2: SERVER
    [invoke] = receiver.named("toolhub.invoke")
    [mcp] = receiver.named("tools/call get_inventory")
    assert request["trace_id"] == invoke["trace_id"] == mcp["trace_id"] == parent_trace  # the caller's trace
    assert request["parent"] == "00f067aa0ba902b7"
    assert invoke["parent"] == request["span_id"] and mcp["parent"] == invoke["span_id"]
    assert request["attributes"]["http.response.status_code"] == 200
    assert invoke["attributes"]["toolhub.tenant"] == "acme"
    assert invoke["attributes"]["toolhub.status"] == "ok" and invoke["attributes"]["toolhub.tool"] == "inventory"
    assert mcp["attributes"]["mcp.method.name"] == "tools/call" and mcp["attributes"]["toolhub.success"] is True
    assert {s["service"] for s in spans} == {"toolhub-test"}
    assert all("DEMO-001" not in str(s["attributes"]) for s in spans)  # arguments stay out of traces


@pytest.mark.django_db(transaction=True)
def test_a_chat_turn_has_a_model_call_span(receiver: Receiver, api: Any) -> None:
    from tests.agents_app.support import MODEL_KEY, chat, make_agent, make_model
    from tests.fixtures.fake_llm import llm_servers, text

    with llm_servers(MODEL_KEY) as start:
        llm = start([text("hello")])
        agent_id = make_agent(api, model=make_model(api, llm), tools=[])
        body = chat(api, agent_id, "hi")
    assert body["status"] == "completed", body
    exported(receiver)
    [model] = receiver.named("chat fake-model")
    assert model["attributes"]["gen_ai.operation.name"] == "chat"
    assert model["attributes"]["gen_ai.request.model"] == "fake-model"
    [request] = [s for s in receiver.spans if s["name"].endswith("/chat/")]
    assert model["trace_id"] == request["trace_id"]


@pytest.mark.django_db(transaction=True)
def test_a_gateway_tools_call_is_traced(receiver: Receiver, tenant: Any, member_client: Any) -> None:
    import anyio

    from tenants_app.models import Role
    from tenants_app.services import token_for_user
    from tests.agents_app.gateway.clients import connect
    from tests.agents_app.gateway.conftest import running_server
    from tests.agents_app.support import inventory_tool, make_agent
    from tools_app.wiring.pool import pool

    api = member_client(tenant, Role.ADMIN)
    tool_id = inventory_tool(api)
    agent_id = make_agent(api, model=None, tools=[{"tool": tool_id}], name="helper")
    token = token_for_user(user=api.user)
    try:
        with running_server() as served:
            async def go() -> Any:
                async with connect(served.endpoint(tenant.slug, agent_id), token) as (session, _init):
                    return await session.call_tool("inventory__get_inventory", {"sku": "DEMO-001"})

            result = anyio.run(go)
    finally:
        pool().close_all()
    assert not result.is_error
    exported(receiver)
    [invoke] = [s for s in receiver.named("toolhub.invoke") if s["attributes"].get("toolhub.via") == "gateway"]
    [mcp] = receiver.named("tools/call get_inventory")
    [handler] = receiver.named("tools/call inventory__get_inventory")
    http = {s["span_id"]: s for s in receiver.named("MCP POST")}
    assert mcp["parent"] == invoke["span_id"] and invoke["parent"] == handler["span_id"]
    request = http[handler["parent"]]  # the POST that carried this tools/call, not the session's first one
    assert request["start"] <= handler["start"] and handler["end"] <= request["end"]
    assert request["trace_id"] == handler["trace_id"] == invoke["trace_id"] == mcp["trace_id"]


def test_a_middleware_built_while_tracing_was_on_serves_after_it_is_turned_off(rf: Any) -> None:
    """A server whose middleware chain was built while tracing was on (another test's receiver, or an operator
    who flushed and stopped it) keeps answering: the span is then the no-op, renamed and given attributes by
    nobody."""
    from django.http import HttpResponse
    from django.urls import resolve

    receiver = Receiver()
    receiver.thread.start()
    try:
        assert tracing.configure(f"{receiver.url}/v1/traces", service_name="toolhub-test", install_global=False)

        def view(request: Any) -> HttpResponse:
            request.resolver_match = resolve("/healthz")
            return HttpResponse("ok")

        middleware = TracingMiddleware(view)
    finally:
        tracing.shutdown()
        receiver.server.shutdown()
        receiver.server.server_close()
    assert middleware(rf.get("/healthz")).status_code == 200
