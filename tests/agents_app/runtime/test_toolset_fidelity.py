"""Toolset names, the per-model function cap, unsupported functions and schemas normalized for OpenAI."""

from __future__ import annotations

from agents_app.runtime.toolset import NAME_RE, assemble, qualify
from tests.agents_app.runtime.support import NOW, candidate

LONG_TOOL = "a" * 64  # the longest tool name Toolhub allows


def test_long_tool_name_shortens_the_tool_part_and_keeps_functions_readable() -> None:
    functions = ["read_file", "write_file", "list_directory", "move_file"]
    toolset = assemble(tenant_id=1, candidates=[candidate(tool_name=LONG_TOOL, function=f) for f in functions],
                       now=NOW)
    names = toolset.names()
    assert len(set(names)) == 4 and all(NAME_RE.match(n) and len(n) <= 64 for n in names)
    for name, function in zip(names, sorted(functions), strict=True):
        assert name.endswith(f"__{function}"), name
        assert toolset.get(name).function == function  # type: ignore[union-attr]


def test_two_long_tool_names_with_one_prefix_stay_distinct() -> None:
    assert qualify(LONG_TOOL, "read_file") != qualify(LONG_TOOL[:-1] + "b", "read_file")


def test_a_very_long_function_name_is_cut_but_stays_unique_and_valid() -> None:
    long_fn = "f" * 80
    a, b = qualify("tool", long_fn), qualify("tool", long_fn + "x")
    assert a != b and len(a) <= 64 and NAME_RE.match(a)


def test_short_names_are_unchanged() -> None:
    assert qualify("inventory", "get_inventory") == "inventory__get_inventory"


def test_cap_leaves_out_the_rest_and_says_why() -> None:
    toolset = assemble(tenant_id=1, candidates=[candidate(function=f"f{i:03}") for i in range(130)], now=NOW)
    capped = toolset.capped(128)
    assert len(capped) == 128 and len(capped.openai_tools()) == 128
    assert [x["function"] for x in capped.left_out] == ["f128", "f129"]
    assert "limit of 128" in capped.left_out[0]["reason"]
    assert toolset.capped(200) is toolset


def test_unsupported_functions_are_left_out_with_the_reason() -> None:
    toolset = assemble(tenant_id=1, candidates=[
        candidate(function="ok"), candidate(function="needs_task", unsupported_reason="requires MCP tasks")], now=NOW)
    assert toolset.names() == ["inventory__ok"]
    assert toolset.left_out == ({"tool": "inventory", "function": "needs_task", "reason": "requires MCP tasks"},)


def test_parameters_are_normalized_for_openai() -> None:
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {"opts": {"type": "object"}, "item": {"$ref": "#/$defs/Item"},
                       "gone": {"$ref": "#/$defs/Missing"}},
        "$defs": {"Item": {"type": "object", "properties": {"id": {"type": "integer"}}}},
    }
    params = assemble(tenant_id=1, candidates=[candidate(input_schema=schema)], now=NOW).functions[0].parameters
    assert "$schema" not in params
    assert params["properties"]["opts"] == {"type": "object", "properties": {}}
    assert params["properties"]["item"] == {"$ref": "#/$defs/Item"} and "Item" in params["$defs"]
    assert "$ref" not in params["properties"]["gone"]
    empty = assemble(tenant_id=1, candidates=[candidate(input_schema={"type": "object"})], now=NOW)
    assert empty.functions[0].parameters == {"type": "object", "properties": {}}
