"""Builders shared by the agent runtime tests: candidates, a small toolset, model configs."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from agents_app.runtime.model_client import ModelConfig
from agents_app.runtime.toolset import FunctionCandidate, Toolset, assemble
from tests.fixtures.fake_llm import FakeLLM

API_KEY = "sk-test-4f2a9c"
NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)

SKU_SCHEMA = {
    "type": "object",
    "properties": {"sku": {"type": "string"}},
    "required": ["sku"],
}
PATH_SCHEMA = {
    "type": "object",
    "properties": {"path": {"type": "string"}, "recursive": {"type": "boolean"}},
    "required": ["path"],
}


def candidate(**overrides: Any) -> FunctionCandidate:
    values: dict[str, Any] = {
        "tool_id": 1,
        "tool_name": "inventory",
        "tool_type": "REMOTE",
        "tool_status": "ENABLED",
        "tool_disabled_until": None,
        "function": "get_inventory",
        "description": "Stock level of a SKU",
        "input_schema": SKU_SCHEMA,
        "state": "ACTIVE",
        "enabled": True,
        "safety": "READ_ONLY",
        "tool_requires_approval": False,
        "function_requires_approval": None,
        "tenant_id": 1,
    }
    values.update(overrides)
    return FunctionCandidate(**values)


def demo_toolset() -> Toolset:
    """inventory__get_inventory (read-only), files__read_file (read-only), files__delete_file (destructive)."""
    return assemble(
        tenant_id=1,
        candidates=[
            candidate(),
            candidate(tool_id=2, tool_name="files", function="read_file", input_schema=PATH_SCHEMA),
            candidate(
                tool_id=2, tool_name="files", function="delete_file", input_schema=PATH_SCHEMA, safety="DESTRUCTIVE"
            ),
        ],
        now=NOW,
    )


def config_for(llm: FakeLLM, **overrides: Any) -> ModelConfig:
    values: dict[str, Any] = {"base_url": llm.base_url, "model": "fake-model", "api_key": API_KEY, "timeout_s": 5.0}
    values.update(overrides)
    return ModelConfig(**values)
