"""The tool plugin contract: schemas generated from the argument type, strict input, the registry's invoke."""

from __future__ import annotations

import enum
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ConfigDict, Field

from tools_app.runtime import registry
from tools_app.runtime.plugin import Safety, ToolArgs, ToolContext, ToolPlugin, input_schema_of
from tools_app.runtime.result import ToolResult


class Color(enum.StrEnum):
    RED = "red"
    BLUE = "blue"


class Node(ToolArgs):
    label: str
    children: list[Node] = Field(default_factory=list)


class Filter(ToolArgs):
    field: str
    value: int


class Args(ToolArgs):
    color: Color = Field(description="A color")
    limit: int = Field(default=10, ge=1, le=100)
    where: Filter | None = None
    tree: Node | None = None
    tags: dict[str, str] = Field(default_factory=dict, description="free-form labels")


class Tree(ToolArgs):
    label: str
    children: list[Tree] = Field(default_factory=list)


class Open(ToolArgs):
    model_config = ConfigDict(extra="allow", strict=True, frozen=True)
    name: str


class Echo(ToolPlugin):
    name = "contract_echo"
    description = "Echo the parsed arguments."
    args_model = Args

    def execute(self, args: Args, ctx: ToolContext) -> ToolResult:
        ctx.logger.info("echo for %s", ctx.user_id)
        return ToolResult.ok(data={"args": args.model_dump(mode="json"), "user": ctx.user_id,
                                   "tenant": ctx.tenant_slug})


class NeedsUser(ToolPlugin):
    name = "contract_needs_user"
    description = "Only for a signed-in user."
    requires_user = True
    safety = Safety.WRITE

    def execute(self, args: Any, ctx: ToolContext) -> ToolResult:
        return ToolResult.ok(text=f"hello {ctx.require_user()}")


class Refuses(ToolPlugin):
    name = "contract_refuses"
    description = "Refuses user 7."

    def execute(self, args: Any, ctx: ToolContext) -> ToolResult:
        return ToolResult.ok(text="ran")

    def refusal(self, ctx: ToolContext) -> str | None:
        return "user 7 may not use this tool" if ctx.user_id == 7 else None


class Crashes(ToolPlugin):
    name = "contract_crashes"
    description = "A bug."

    def execute(self, args: Any, ctx: ToolContext) -> ToolResult:
        raise ZeroDivisionError("secret detail")


@pytest.fixture
def plugins() -> Iterator[None]:
    for cls in (Echo, NeedsUser, Refuses, Crashes):
        registry.register(cls)
    yield
    for cls in (Echo, NeedsUser, Refuses, Crashes):
        registry.unregister(cls.name)


def ctx(tmp_path: Path, user_id: Any = None) -> ToolContext:
    return ToolContext(tenant_slug="acme", workspace=tmp_path, user_id=user_id, user=user_id and f"u{user_id}")


def test_schema_has_enums_defaults_required_and_closed_nested_defs() -> None:
    schema = input_schema_of(Args)
    assert schema["type"] == "object" and schema["additionalProperties"] is False
    assert schema["required"] == ["color"]
    assert schema["properties"]["limit"] == {"default": 10, "maximum": 100, "minimum": 1, "title": "Limit",
                                             "type": "integer"}
    assert schema["$defs"]["Color"]["enum"] == ["red", "blue"]
    assert schema["$defs"]["Filter"]["additionalProperties"] is False
    node = schema["$defs"]["Node"]
    assert node["additionalProperties"] is False
    assert node["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}
    # a free-form map stays open: its values are typed, its keys are the caller's
    assert schema["properties"]["tags"]["additionalProperties"] == {"type": "string"}


def test_self_referencing_root_is_inlined_as_an_object() -> None:
    schema = input_schema_of(Tree)
    assert schema["type"] == "object" and "$ref" not in schema
    assert schema["properties"]["children"]["items"] == {"$ref": "#/$defs/Tree"}
    assert schema["additionalProperties"] is False and "Tree" in schema["$defs"]


def test_an_open_model_keeps_additional_properties() -> None:
    assert input_schema_of(Open)["additionalProperties"] is True


def test_spec_flags_follow_safety() -> None:
    read = registry.spec_of(Echo, source="test")
    write = registry.spec_of(NeedsUser, source="test")
    assert (read.default_enabled, read.requires_approval, read.safety) == (True, False, "READ_ONLY")
    assert (write.default_enabled, write.requires_approval, write.safety) == (False, False, "WRITE")
    assert read.undone_by_rollback and not read.runs_outside_transaction
    assert write.hooks == frozenset() and registry.spec_of(Refuses, source="t").hooks == {"refusal"}


@pytest.mark.parametrize(
    "bad",
    [
        type("NoName", (ToolPlugin,), {"description": "x", "execute": lambda s, a, c: ToolResult.ok()}),
        type("BadName", (ToolPlugin,), {"name": "Bad Name", "description": "x",
                                        "execute": lambda s, a, c: ToolResult.ok()}),
        type("NoDescription", (ToolPlugin,), {"name": "nodesc", "execute": lambda s, a, c: ToolResult.ok()}),
        type("NoExecute", (ToolPlugin,), {"name": "noexec", "description": "x"}),
        type("BadArgs", (ToolPlugin,), {"name": "badargs", "description": "x", "args_model": dict,
                                        "execute": lambda s, a, c: ToolResult.ok()}),
    ],
)
def test_malformed_plugins_are_refused_at_registration(bad: type[ToolPlugin]) -> None:
    with pytest.raises(TypeError):
        registry.register(bad)


def test_duplicate_names_are_refused(plugins: None) -> None:
    with pytest.raises(registry.DuplicateTool, match="contract_echo"):
        registry.register(Echo)


def test_invoke_parses_enums_nested_and_recursive_arguments(plugins: None, tmp_path: Path) -> None:
    arguments = {"color": "blue", "where": {"field": "qty", "value": 3},
                 "tree": {"label": "a", "children": [{"label": "b"}]}, "tags": {"k": "v"}}
    result = registry.invoke_tool("contract_echo", "contract_echo", arguments, ctx(tmp_path, user_id=5))
    assert result.success, result
    assert result.data["args"] == {**arguments, "limit": 10,
                                   "tree": {"label": "a", "children": [{"label": "b", "children": []}]}}
    assert (result.data["user"], result.data["tenant"]) == (5, "acme")


@pytest.mark.parametrize(
    ("arguments", "fragments"),
    [
        ({"color": "green"}, ["'color'", "'red' or 'blue'"]),
        ({"color": "red", "limit": "3"}, ["'limit'", "integer", "got str"]),
        ({"color": "red", "where": {"field": "a", "value": 1, "op": "eq"}}, ["'where.op'", "Extra inputs"]),
        ({"color": "red", "tree": {"label": "a", "children": [{"name": "b"}]}}, ["'tree.children.0.label'"]),
        ({"colour": "red"}, ["unknown argument(s) 'colour'", "accepted: color, limit, tags, tree, where"]),
        ({}, ["'color'", "required"]),
    ],
)
def test_strict_input_names_the_problem(plugins: None, tmp_path: Path, arguments: Any, fragments: list[str]) -> None:
    result = registry.invoke_tool("contract_echo", "contract_echo", arguments, ctx(tmp_path))
    assert result.error_code == "INVALID_PARAMS", result
    for fragment in fragments:
        assert fragment in (result.error or ""), result.error
    assert result.meta["accepted"] == ["color", "limit", "tags", "tree", "where"]


def test_requires_user_refuses_a_call_without_one(plugins: None, tmp_path: Path) -> None:
    result = registry.invoke_tool("contract_needs_user", "contract_needs_user", {}, ctx(tmp_path))
    assert (result.error_code, result.error) == ("REFUSED", "this tool needs a signed-in user and the call has none")
    assert registry.invoke_tool("contract_needs_user", "contract_needs_user", {}, ctx(tmp_path, 3)).text == "hello u3"


def test_refusal_hook_refuses_before_the_arguments_are_read(plugins: None, tmp_path: Path) -> None:
    refused = registry.invoke_tool("contract_refuses", "contract_refuses", {"junk": 1}, ctx(tmp_path, 7))
    assert (refused.error_code, refused.error) == ("REFUSED", "user 7 may not use this tool")
    assert registry.invoke_tool("contract_refuses", "contract_refuses", {}, ctx(tmp_path, 8)).text == "ran"


def test_a_crashing_tool_is_an_execution_error_without_its_message(plugins: None, tmp_path: Path) -> None:
    result = registry.invoke_tool("contract_crashes", "contract_crashes", {}, ctx(tmp_path))
    assert (result.error_code, result.error) == ("EXECUTION_ERROR", "contract_crashes failed: ZeroDivisionError")


def test_the_nine_builtins_are_on_the_one_registry() -> None:
    names = {s.name for s in registry.all_tools() if s.source == "builtin"}
    assert names == {"read_file", "list_directory", "write_file", "edit_file", "delete_file", "execute_command",
                     "query_all_tables", "query_table_schema", "execute_sql_query"}
    for name in names:
        spec = registry.get_tool(name)
        assert spec.runs_outside_transaction and not spec.undone_by_rollback, name
