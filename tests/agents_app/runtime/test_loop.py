"""The agent loop against a real OpenAI-compatible HTTP server: streaming, tool calls, failures, limits."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable
from typing import Any

from agents_app.runtime.loop import Event, run
from agents_app.runtime.model_client import ModelConfig
from agents_app.runtime.toolset import Toolset, ToolsetFunction
from tests.agents_app.runtime.support import API_KEY, config_for
from tests.fixtures.fake_llm import FakeLLM, call, calls, http_error, slow, text
from tests.waiting import BOUND_S
from tools_app.runtime.result import TIMEOUT, ToolResult

FakeFactory = Callable[..., FakeLLM]
USER = [{"role": "system", "content": "You are a stock assistant."}, {"role": "user", "content": "Stock of A-1?"}]


class Recorder:
    """An execute callback: records calls, answers with a fixed function of the arguments."""

    def __init__(self, answer: Callable[[ToolsetFunction, dict[str, Any]], ToolResult] | None = None) -> None:
        self.calls: list[tuple[str, dict[str, Any], str]] = []
        self.answer = answer or (lambda fn, args: ToolResult.ok(data={"sku": args.get("sku"), "stock": 7}))
        self._lock = threading.Lock()

    def __call__(self, fn: ToolsetFunction, arguments: dict[str, Any], call_id: str) -> ToolResult:
        with self._lock:
            self.calls.append((fn.qualified_name, arguments, call_id))
        return self.answer(fn, arguments)


def drive(llm: FakeLLM, toolset: Toolset, execute: Any, messages: list[dict[str, Any]] | None = None,
          **kwargs: Any) -> tuple[list[Event], list[dict[str, Any]]]:
    messages = messages if messages is not None else [dict(m) for m in USER]
    kwargs.setdefault("max_steps", 5)
    config = kwargs.pop("config", None) or config_for(llm)
    events = list(run(model=config, messages=messages, toolset=toolset, execute=execute, **kwargs))
    return events, messages


def names(events: list[Event]) -> list[str]:
    return [name for name, _ in events if name != "message.delta"]


def of(events: list[Event], name: str) -> list[dict[str, Any]]:
    return [data for n, data in events if n == name]


def tool_messages(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in request["messages"] if m["role"] == "tool"]


def test_text_reply_streams_deltas_and_finishes(fake_llm: FakeFactory, toolset: Toolset) -> None:
    llm = fake_llm([text("Seven units of A-1 are in stock.")])
    events, messages = drive(llm, toolset, Recorder())

    deltas = [d["text"] for d in of(events, "message.delta")]
    assert len(deltas) > 1 and "".join(deltas) == "Seven units of A-1 are in stock."
    assert events[-1] == ("done", {"status": "completed", "message": "Seven units of A-1 are in stock.", "steps": 1})
    assert messages[-1] == {"role": "assistant", "content": "Seven units of A-1 are in stock."}
    # The model was offered the qualified tool names with their schemas.
    offered = [t["function"]["name"] for t in llm.requests[0]["tools"]]
    assert sorted(offered) == ["files__delete_file", "files__read_file", "inventory__get_inventory"]
    assert llm.requests[0]["stream"] is True


def test_tool_call_result_then_final_answer(fake_llm: FakeFactory, toolset: Toolset) -> None:
    llm = fake_llm([call("inventory__get_inventory", {"sku": "A-1"}), text("A-1: 7 in stock.")])
    execute = Recorder()
    events, messages = drive(llm, toolset, execute)

    assert names(events) == ["tool.call", "tool.result", "done"]
    tool_call, tool_result = of(events, "tool.call")[0], of(events, "tool.result")[0]
    assert tool_call["tool"] == "inventory" and tool_call["function"] == "get_inventory"
    assert tool_call["arguments"] == {"sku": "A-1"}
    assert tool_result["status"] == "ok" and tool_result["call_id"] == tool_call["call_id"]
    assert execute.calls == [("inventory__get_inventory", {"sku": "A-1"}, tool_call["call_id"])]
    assert events[-1][1] == {"status": "completed", "message": "A-1: 7 in stock.", "steps": 2}

    # The second request carried the full transcript: the assistant's tool call and the tool answer.
    second = llm.requests[1]["messages"]
    assert second[2]["role"] == "assistant" and second[2]["tool_calls"][0]["function"]["name"] == "inventory__get_inventory"
    assert second[3] == {"role": "tool", "tool_call_id": tool_call["call_id"], "content": '{"sku": "A-1", "stock": 7}'}
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "assistant"]


def test_parallel_calls_run_concurrently(fake_llm: FakeFactory, toolset: Toolset) -> None:
    llm = fake_llm(
        [
            calls(("inventory__get_inventory", {"sku": "A-1"}), ("inventory__get_inventory", {"sku": "B-2"})),
            text("both done"),
        ]
    )
    # Both calls must be inside the tool at the same time to pass the barrier; run one after the
    # other, the first would wait alone and the barrier would break.
    barrier = threading.Barrier(2, timeout=BOUND_S)  # a hang guard: run one after the other, the first waits alone

    def meeting_tool(fn: ToolsetFunction, args: dict[str, Any]) -> ToolResult:
        try:
            barrier.wait()
        except threading.BrokenBarrierError:
            return ToolResult.fail("EXECUTION_ERROR", "calls did not overlap")
        return ToolResult.ok(text=f"{args['sku']}: 7")

    events, messages = drive(llm, toolset, Recorder(meeting_tool))

    assert [data["success"] for data in of(events, "tool.result")] == [True, True]
    # Answers keep the model's call order, whatever order they finished in.
    assert [m["content"] for m in tool_messages(llm.requests[1])] == ["A-1: 7", "B-2: 7"]


def test_unknown_tool_is_fed_back_not_raised(fake_llm: FakeFactory, toolset: Toolset) -> None:
    llm = fake_llm([call("get_inventory", {"sku": "A-1"}), text("sorry")])
    execute = Recorder()
    events, _ = drive(llm, toolset, execute)

    result = of(events, "tool.result")[0]
    assert result["status"] == "error" and result["error_code"] == "NOT_FOUND"
    fed = tool_messages(llm.requests[1])[0]["content"]
    assert "unknown tool 'get_inventory'" in fed and "inventory__get_inventory" in fed
    assert execute.calls == []
    assert events[-1][0] == "done"


def test_malformed_json_arguments_are_fed_back(fake_llm: FakeFactory, toolset: Toolset) -> None:
    llm = fake_llm([call("inventory__get_inventory", '{"sku": "A-1"'), text("retrying is up to me")])
    execute = Recorder()
    events, _ = drive(llm, toolset, execute)

    assert of(events, "tool.call")[0]["arguments"] == '{"sku": "A-1"'
    assert of(events, "tool.result")[0]["error_code"] == "INVALID_PARAMS"
    assert "not valid JSON" in tool_messages(llm.requests[1])[0]["content"]
    assert execute.calls == []


def test_schema_failure_is_fed_back_before_execute(fake_llm: FakeFactory, toolset: Toolset) -> None:
    llm = fake_llm(
        [
            calls(("inventory__get_inventory", {"sku": 5}), ("inventory__get_inventory", {"sku": "A-1", "qty": 2})),
            text("ok"),
        ]
    )
    execute = Recorder()
    events, _ = drive(llm, toolset, execute)

    assert [r["error_code"] for r in of(events, "tool.result")] == ["INVALID_PARAMS", "INVALID_PARAMS"]
    fed = [m["content"] for m in tool_messages(llm.requests[1])]
    assert "sku" in fed[0]
    assert "unknown argument(s) qty" in fed[1] and "accepted: sku" in fed[1]
    assert execute.calls == []


def test_endless_tool_loop_stops_at_max_steps(fake_llm: FakeFactory, toolset: Toolset) -> None:
    llm = fake_llm([call("inventory__get_inventory", {"sku": "A-1"})], repeat_last=True)
    execute = Recorder()
    events, messages = drive(llm, toolset, execute, max_steps=3)

    assert events[-1][0] == "error"
    assert events[-1][1]["code"] == "max_steps_exceeded" and events[-1][1]["steps"] == 3
    assert len(llm.requests) == 3
    assert len(execute.calls) == 2  # the last turn's call is answered, not run: nobody would read it
    # The transcript stays valid for the next user message: every call has an answer.
    call_ids = [tc["id"] for m in messages if m["role"] == "assistant" for tc in m["tool_calls"]]
    assert [m["tool_call_id"] for m in messages if m["role"] == "tool"] == call_ids


def test_model_down_is_an_error_event(toolset: Toolset) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again on exit: nothing listens there
    config = ModelConfig(base_url=f"http://127.0.0.1:{port}/v1", model="m", api_key=API_KEY, timeout_s=2)
    messages = [dict(m) for m in USER]
    events = list(run(model=config, messages=messages, toolset=toolset, execute=Recorder(), max_steps=3))
    assert events == [
        ("error", {"code": "model_unreachable", "message": f"cannot reach the model at 127.0.0.1:{port}", "steps": 0})
    ]
    assert len(messages) == 2


def test_wrong_key_is_model_auth_without_the_key(fake_llm: FakeFactory, toolset: Toolset) -> None:
    llm = fake_llm([text("never")])
    events, _ = drive(llm, toolset, Recorder(), config=config_for(llm, api_key="sk-wrong-123456"))
    assert events[-1][0] == "error" and events[-1][1]["code"] == "model_auth"
    assert "sk-wrong-123456" not in json.dumps(events)
    assert llm.headers[0]["authorization"] == "Bearer sk-wrong-123456"  # the server did see (and echo) it


def test_server_error_and_timeout(fake_llm: FakeFactory, toolset: Toolset) -> None:
    llm = fake_llm([http_error(500)])
    events, _ = drive(llm, toolset, Recorder())
    assert events[-1][1]["code"] == "model_error" and "HTTP 500" in events[-1][1]["message"]

    llm = fake_llm([slow(3.0)])
    events, _ = drive(llm, toolset, Recorder(), config=config_for(llm, timeout_s=0.4))
    assert events[-1][1]["code"] == "model_timeout"  # not the slow answer: the run did not wait for it


def test_tool_timeout_is_a_result_fed_back(fake_llm: FakeFactory, toolset: Toolset) -> None:
    llm = fake_llm([call("inventory__get_inventory", {"sku": "A-1"}), text("the inventory service timed out")])
    events, _ = drive(llm, toolset, Recorder(lambda fn, args: ToolResult.fail(TIMEOUT, "no answer within 30s")))

    result = of(events, "tool.result")[0]
    assert result["status"] == "error" and result["error_code"] == TIMEOUT
    assert tool_messages(llm.requests[1])[0]["content"] == "Error (TIMEOUT): no answer within 30s"
    assert events[-1][1]["message"] == "the inventory service timed out"


def test_execute_exception_is_a_result_without_its_text(fake_llm: FakeFactory, toolset: Toolset) -> None:
    def boom(fn: ToolsetFunction, args: dict[str, Any]) -> ToolResult:
        raise RuntimeError("password=hunter2")

    llm = fake_llm([call("inventory__get_inventory", {"sku": "A-1"}), text("failed")])
    events, _ = drive(llm, toolset, Recorder(boom))
    assert of(events, "tool.result")[0]["error_code"] == "EXECUTION_ERROR"
    assert "hunter2" not in json.dumps(llm.requests) + json.dumps(events)


def test_long_results_are_truncated_with_a_notice(fake_llm: FakeFactory, toolset: Toolset) -> None:
    llm = fake_llm([call("inventory__get_inventory", {"sku": "A-1"}), text("long")])
    drive(llm, toolset, Recorder(lambda fn, args: ToolResult.ok(text="x" * 500)), result_char_cap=100)
    content = tool_messages(llm.requests[1])[0]["content"]
    assert content.startswith("x" * 100) and content.endswith("[truncated: showing 100 of 500 characters]")


def test_model_params_reach_the_server_but_cannot_override_the_loop(fake_llm: FakeFactory, toolset: Toolset) -> None:
    llm = fake_llm([text("hi")])
    drive(llm, toolset, Recorder(), config=config_for(llm, params={"temperature": 0.2, "stream": False, "model": "x"}))
    assert llm.requests[0]["temperature"] == 0.2
    assert llm.requests[0]["stream"] is True and llm.requests[0]["model"] == "fake-model"
