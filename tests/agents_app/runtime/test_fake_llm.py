"""The fake LLM itself: non-streaming replies, the demo model's rules, and its command line."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from agents_app.runtime.loop import run
from agents_app.runtime.model_client import ModelConfig
from agents_app.runtime.toolset import ToolsetFunction, assemble
from tests.agents_app.runtime.support import NOW, candidate
from tests.fixtures.fake_llm import DEMO_NOTICE, FakeLLM, call, text
from tests.waiting import wait_until
from tools_app.runtime.result import ToolResult

ROOT = Path(__file__).resolve().parents[3]


def test_non_streaming_completion_with_tool_call() -> None:
    # openai here, not at the top: every xdist worker collects (imports) this module, one runs it (~0.5 s of CPU)
    import openai
    from openai.types.chat import ChatCompletionMessageFunctionToolCall

    with FakeLLM([call("inventory__get_inventory", {"sku": "A-1"}), text("hello")]) as llm:
        client = openai.OpenAI(base_url=llm.base_url, api_key="any", max_retries=0)
        first = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        second = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        client.close()
    tool_calls = first.choices[0].message.tool_calls
    assert tool_calls is not None
    tool_call = tool_calls[0]
    assert isinstance(tool_call, ChatCompletionMessageFunctionToolCall)
    assert tool_call.function.name == "inventory__get_inventory"
    assert tool_call.function.arguments == '{"sku": "A-1"}'
    assert first.choices[0].finish_reason == "tool_calls"
    assert second.choices[0].message.content == "hello"


def test_exhausted_script_is_a_loud_500() -> None:
    import openai  # at first use (see the first test)

    with FakeLLM([]) as llm:
        client = openai.OpenAI(base_url=llm.base_url, api_key="any", max_retries=0)
        try:
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        except openai.InternalServerError as exc:
            assert "script exhausted" in str(exc)
        else:
            raise AssertionError("expected a 500")
        finally:
            client.close()


def test_demo_model_looks_up_a_sku_and_says_it_is_a_demo() -> None:
    toolset = assemble(tenant_id=1, candidates=[candidate(tool_name="demo")], now=NOW)
    seen: list[dict[str, Any]] = []

    def execute(fn: ToolsetFunction, arguments: dict[str, Any], call_id: str) -> ToolResult:
        seen.append(arguments)
        return ToolResult.ok(data={"sku": arguments["sku"], "on_hand": 42})

    with FakeLLM(None) as llm:
        config = ModelConfig(base_url=llm.base_url, model="demo", api_key="")
        messages: list[dict[str, Any]] = [{"role": "user", "content": "How many DEMO-001 do we have?"}]
        events = list(run(model=config, messages=messages, toolset=toolset, execute=execute, max_steps=4))
        assert seen == [{"sku": "DEMO-001"}]
        assert events[-1][0] == "done"
        assert events[-1][1]["message"].startswith(DEMO_NOTICE) and "42" in events[-1][1]["message"]

        messages = [{"role": "user", "content": "What is the meaning of life?"}]
        events = list(run(model=config, messages=messages, toolset=toolset, execute=execute, max_steps=4))
        assert "demo model" in events[-1][1]["message"] and "not an AI" in events[-1][1]["message"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_command_line_serves_the_demo_model() -> None:
    import openai  # at first use (see the first test)

    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "toolhub_demo.demo_model", "--port", str(port)],
        cwd=str(ROOT),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert "rule-based, not an AI" in proc.stdout.readline()
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", max_retries=0)
        replies: list[Any] = []

        def answered() -> bool:
            try:
                replies.append(client.chat.completions.create(model="demo",
                                                              messages=[{"role": "user", "content": "hi"}]))
            except openai.APIConnectionError:
                return False  # not listening yet
            return True

        assert wait_until(answered), "the demo model never answered"
        client.close()
        assert DEMO_NOTICE in (replies[0].choices[0].message.content or "")
    finally:
        proc.terminate()
        proc.wait(timeout=5)
        if proc.stdout is not None:
            proc.stdout.close()
