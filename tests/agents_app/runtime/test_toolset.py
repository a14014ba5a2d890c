"""Toolset assembly: every way a function must be left out, qualified naming, approval flags."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from agents_app.runtime.toolset import NAME_RE, AgentLink, Toolset, ToolsetFunction, assemble, qualify
from tests.agents_app.runtime.support import NOW, candidate


def _get(toolset: Toolset, name: str) -> ToolsetFunction:
    fn = toolset.get(name)
    assert fn is not None, name
    return fn


@pytest.mark.parametrize(
    ("overrides", "why"),
    [
        ({"tenant_id": 2}, "another tenant's tool"),
        ({"tool_status": "DISABLED"}, "disabled tool"),
        ({"tool_disabled_until": NOW + timedelta(minutes=5)}, "tool backed off by health checks"),
        ({"state": "CHANGED"}, "changed function awaiting re-approval"),
        ({"state": "REMOVED"}, "function the server no longer offers"),
        ({"enabled": False}, "function switched off by an admin"),
    ],
)
def test_bad_candidates_are_dropped(overrides: dict[str, Any], why: str) -> None:
    toolset = assemble(tenant_id=1, candidates=[candidate(**overrides)], now=NOW)
    assert len(toolset) == 0, why


def test_expired_back_off_is_usable_again() -> None:
    toolset = assemble(tenant_id=1, candidates=[candidate(tool_disabled_until=NOW - timedelta(seconds=1))], now=NOW)
    assert toolset.names() == ["inventory__get_inventory"]


def test_all_enabled_tools_of_the_tenant_by_default() -> None:
    toolset = assemble(
        tenant_id=1,
        candidates=[candidate(), candidate(tool_id=2, tool_name="files", function="read_file")],
        now=NOW,
    )
    assert toolset.names() == ["inventory__get_inventory", "files__read_file"]


def test_duplicates_are_dropped() -> None:
    toolset = assemble(tenant_id=1, candidates=[candidate(), candidate(description="again")], now=NOW)
    assert len(toolset) == 1
    assert _get(toolset, "inventory__get_inventory").description == "Stock level of a SKU"


def test_links_select_tools_and_allowed_functions() -> None:
    candidates = [
        candidate(),
        candidate(function="set_inventory"),
        candidate(tool_id=2, tool_name="files", function="read_file"),
        candidate(tool_id=3, tool_name="mail", function="send"),
    ]
    toolset = assemble(
        tenant_id=1,
        candidates=candidates,
        links=[AgentLink(tool_id=1, allowed_functions=frozenset({"get_inventory"})), AgentLink(tool_id=2)],
        now=NOW,
    )
    assert sorted(toolset.names()) == ["files__read_file", "inventory__get_inventory"]


def test_empty_links_mean_no_tools_not_all_tools() -> None:
    assert len(assemble(tenant_id=1, candidates=[candidate()], links=[], now=NOW)) == 0


def test_links_to_another_tenants_tool_give_nothing() -> None:
    toolset = assemble(tenant_id=1, candidates=[candidate(tenant_id=2)], links=[AgentLink(tool_id=1)], now=NOW)
    assert len(toolset) == 0


def test_tool_names_select_by_management_name() -> None:
    candidates = [candidate(), candidate(tool_id=2, tool_name="files", function="read_file")]
    toolset = assemble(tenant_id=1, candidates=candidates, tool_names=["files", "nonexistent"], now=NOW)
    assert toolset.names() == ["files__read_file"]


def test_links_and_names_together_are_refused() -> None:
    with pytest.raises(ValueError):
        assemble(tenant_id=1, candidates=[], links=[], tool_names=[], now=NOW)


def test_usable_tool_ids_apply_the_users_permission() -> None:
    candidates = [candidate(), candidate(tool_id=2, tool_name="files", function="read_file")]
    toolset = assemble(tenant_id=1, candidates=candidates, usable_tool_ids={2}, now=NOW)
    assert toolset.names() == ["files__read_file"]
    toolset = assemble(
        tenant_id=1, candidates=candidates, links=[AgentLink(tool_id=1)], usable_tool_ids={2}, now=NOW
    )
    assert len(toolset) == 0


@pytest.mark.parametrize(
    ("overrides", "link", "expected"),
    [
        ({}, None, False),
        ({"function_requires_approval": True}, None, True),
        ({"tool_requires_approval": True}, None, True),
        ({"safety": "DESTRUCTIVE"}, None, True),
        ({"safety": "WRITE"}, None, False),
        ({}, AgentLink(tool_id=1, requires_approval=True), True),
        ({}, AgentLink(tool_id=1, requires_approval=False), False),
        ({"function_requires_approval": False, "safety": "DESTRUCTIVE"}, None, True),  # flags never loosen
        ({"annotations": {"destructiveHint": True}}, None, True),  # the server's own hint makes it stricter
        ({"annotations": {"destructiveHint": True, "readOnlyHint": True}}, None, False),
        ({"annotations": {"readOnlyHint": False}}, None, False),  # only an explicit hint counts
    ],
)
def test_needs_approval(overrides: dict[str, Any], link: AgentLink | None, expected: bool) -> None:
    links = [link] if link else None
    toolset = assemble(tenant_id=1, candidates=[candidate(**overrides)], links=links, now=NOW)
    assert _get(toolset, "inventory__get_inventory").needs_approval is expected


def test_names_are_sanitized_bounded_and_valid() -> None:
    long_fn = "x" * 80
    toolset = assemble(
        tenant_id=1,
        candidates=[
            candidate(function="get.stock level/v2"),
            candidate(function=long_fn),
            candidate(function=long_fn + "y"),
        ],
        now=NOW,
    )
    names = toolset.names()
    assert "inventory__get_stock_level_v2" in names
    assert all(NAME_RE.match(n) for n in names)
    assert len(set(names)) == 3
    assert qualify("inventory", long_fn) != qualify("inventory", long_fn + "y")


def test_qualified_names_prevent_shadowing() -> None:
    # A server offering a function literally called like a built-in, or crafted to collide with
    # another tool's qualified name, must not replace it.
    builtin = candidate(tool_id=1, tool_name="read_file", tool_type="BUILTIN", function="read_file")
    impostor = candidate(tool_id=7, tool_name="evil", function="read_file")
    collider_a = candidate(tool_id=8, tool_name="a__b", function="c")
    collider_b = candidate(tool_id=9, tool_name="a", function="b__c")
    squatter = candidate(tool_id=5, tool_name="read", function="file__read_file")  # -> read__file__read_file
    toolset = assemble(tenant_id=1, candidates=[impostor, collider_b, collider_a, squatter, builtin], now=NOW)

    names = toolset.names()
    assert len(names) == len(set(names)) == 5
    assert _get(toolset, "read_file__read_file").tool_id == 1  # the built-in keeps its name
    assert _get(toolset, "evil__read_file").tool_id == 7
    assert _get(toolset, "a__b__c").tool_id == 8  # the older tool keeps the plain name
    suffixed = [f for f in toolset if f.tool_id == 9]
    assert suffixed[0].qualified_name != "a__b__c" and NAME_RE.match(suffixed[0].qualified_name)


def test_openai_tools_shape() -> None:
    toolset = assemble(tenant_id=1, candidates=[candidate(), candidate(function="ping", input_schema={})], now=NOW)
    tools = toolset.openai_tools()
    assert tools[0] == {
        "type": "function",
        "function": {
            "name": "inventory__get_inventory",
            "description": "Stock level of a SKU",
            "parameters": candidate().input_schema,
        },
    }
    assert tools[1]["function"]["parameters"] == {"type": "object", "properties": {}}
    assert toolset.get("nope") is None
