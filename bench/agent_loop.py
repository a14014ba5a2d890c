"""Agent loop benchmark: loop overhead over a raw SDK stream, and parallel tool-call speedup, side by side.

Run: .venv/bin/python bench/agent_loop.py [--runs 40] [--calls 8] [--tool-ms 100]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import openai

from agents_app.runtime.loop import run
from agents_app.runtime.model_client import ModelConfig
from agents_app.runtime.toolset import FunctionCandidate, ToolsetFunction, assemble
from tests.fixtures.fake_llm import FakeLLM, calls, text
from tools_app.runtime.result import ToolResult

MESSAGES = [{"role": "user", "content": "hello"}]
REPLY = "A reply of a dozen words or so, streamed word by word to the client."


def _toolset() -> Any:
    from datetime import UTC, datetime

    candidate = FunctionCandidate(
        tool_id=1, tool_name="inv", tool_type="REMOTE", tool_status="ENABLED", tool_disabled_until=None,
        function="get", description="", input_schema={"type": "object", "properties": {"i": {"type": "integer"}}},
        state="ACTIVE", enabled=True, safety="READ_ONLY", tool_requires_approval=False,
        function_requires_approval=None, tenant_id=1,
    )
    return assemble(tenant_id=1, candidates=[candidate], now=datetime.now(UTC))


def bench_overhead(runs: int) -> tuple[float, float]:
    with FakeLLM([text(REPLY)], repeat_last=True) as llm:
        client = openai.OpenAI(base_url=llm.base_url, api_key="x", max_retries=0)
        raw: list[float] = []
        for _ in range(runs):
            started = time.perf_counter()
            for _chunk in client.chat.completions.create(model="m", messages=MESSAGES, stream=True):  # type: ignore[arg-type]
                pass
            raw.append(time.perf_counter() - started)
        client.close()
        config = ModelConfig(base_url=llm.base_url, model="m", api_key="x")
        looped: list[float] = []
        toolset = _toolset()
        for _ in range(runs):
            started = time.perf_counter()
            list(run(model=config, messages=list(MESSAGES), toolset=toolset,
                     execute=lambda *a: ToolResult.ok(), max_steps=3))
            looped.append(time.perf_counter() - started)
    return statistics.median(raw), statistics.median(looped)


def bench_parallel(n_calls: int, tool_ms: int) -> tuple[float, float]:
    def slow(fn: ToolsetFunction, arguments: dict[str, Any], call_id: str) -> ToolResult:
        time.sleep(tool_ms / 1000)
        return ToolResult.ok(text="done")

    script = [calls(*[("inv__get", {"i": i}) for i in range(n_calls)]), text("ok")]
    with FakeLLM(script) as llm:
        config = ModelConfig(base_url=llm.base_url, model="m", api_key="x")
        started = time.perf_counter()
        list(run(model=config, messages=list(MESSAGES), toolset=_toolset(), execute=slow, max_steps=3))
        elapsed = time.perf_counter() - started
    return n_calls * tool_ms / 1000, elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--calls", type=int, default=8)
    parser.add_argument("--tool-ms", type=int, default=100)
    args = parser.parse_args()
    raw, looped = bench_overhead(args.runs)
    print(f"one text turn, median of {args.runs}: raw SDK stream {raw * 1000:.2f} ms, "
          f"agent loop {looped * 1000:.2f} ms, ratio {looped / raw:.2f}x")
    sequential, parallel = bench_parallel(args.calls, args.tool_ms)
    print(f"{args.calls} tool calls of {args.tool_ms} ms in one turn: sequential would be {sequential * 1000:.0f} ms, "
          f"loop (2 model turns included) {parallel * 1000:.0f} ms, speedup {sequential / parallel:.2f}x")


if __name__ == "__main__":
    main()
