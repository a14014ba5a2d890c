"""Registry: the nine built-ins, their safety flags, closed schemas and strict argument validation."""

from __future__ import annotations

import pytest

from tools_app.runtime.builtins import BuiltinContext, all_builtins, get_builtin, invoke_builtin
from tools_app.runtime.builtins.registry import BuiltinArgs, Safety, builtin
from tools_app.runtime.result import ToolResult
from tools_app.runtime.tool_spec import DuplicateTool

EXPECTED = {
    # name: (safety, requires_approval, default_enabled)
    "read_file": ("READ_ONLY", False, True),
    "list_directory": ("READ_ONLY", False, True),
    "query_all_tables": ("READ_ONLY", False, True),
    "query_table_schema": ("READ_ONLY", False, True),
    "execute_sql_query": ("READ_ONLY", False, False),
    "write_file": ("WRITE", False, False),
    "edit_file": ("WRITE", False, False),
    "delete_file": ("DESTRUCTIVE", True, False),
    "execute_command": ("DESTRUCTIVE", True, False),
}


def test_the_nine_builtins_are_registered_with_their_flags() -> None:
    specs = {s.name: s for s in all_builtins()}
    assert set(specs) == set(EXPECTED)
    for name, (safety, approval, enabled) in EXPECTED.items():
        spec = specs[name]
        assert (spec.safety, spec.requires_approval, spec.default_enabled) == (safety, approval, enabled), (
            name
        )
        assert spec.function_name == name
        assert spec.description


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_schemas_are_closed_objects(name: str) -> None:
    schema = get_builtin(name).input_schema
    assert schema["type"] == "object"
    assert schema["additionalProperties"] is False
    for sub in schema.get("$defs", {}).values():
        if sub.get("type") == "object":
            assert sub["additionalProperties"] is False


def test_duplicate_name_is_refused_at_registration() -> None:
    class Args(BuiltinArgs):
        pass

    with pytest.raises(DuplicateTool, match="read_file"):

        @builtin(name="read_file", description="again", safety=Safety.READ_ONLY)
        def again(args: Args, ctx: BuiltinContext) -> ToolResult:
            return ToolResult.ok()


@pytest.mark.parametrize(
    ("arguments", "fragments"),
    [
        ({"path": "a", "mode": "x"}, ["'mode'", "accepted: path"]),
        ({"path": 3}, ["'path'", "string", "got int"]),
        ({}, ["'path'", "required"]),
        ([1, 2], ["JSON object"]),
    ],
)
def test_strict_validation_names_the_problem(
    ctx: BuiltinContext, arguments: object, fragments: list[str]
) -> None:
    result = invoke_builtin("read_file", "read_file", arguments, ctx)
    assert result.error_code == "INVALID_PARAMS"
    for fragment in fragments:
        assert fragment in (result.error or "")


def test_wrong_type_for_bool_and_int_is_refused(ctx: BuiltinContext) -> None:
    result = invoke_builtin("list_directory", "list_directory", {"recursive": "yes", "depth": "3"}, ctx)
    assert result.error_code == "INVALID_PARAMS"
    assert "'recursive'" in (result.error or "") and "'depth'" in (result.error or "")
    result = invoke_builtin("list_directory", "list_directory", {"recursive": True, "depth": 11}, ctx)
    assert result.error_code == "INVALID_PARAMS" and "depth" in (result.error or "")


def test_unknown_builtin_and_function(ctx: BuiltinContext) -> None:
    assert invoke_builtin("nope", "nope", {}, ctx).error_code == "NOT_FOUND"
    assert invoke_builtin("read_file", "readFile", {"path": "x"}, ctx).error_code == "NOT_FOUND"


class _Inner(BuiltinArgs):
    key: str


class _Outer(BuiltinArgs):
    items: list[_Inner]
    mode: str = "a"


def test_nested_models_are_closed_in_defs() -> None:
    from tools_app.runtime.builtins.registry import input_schema_of

    schema = input_schema_of(_Outer)
    assert schema["additionalProperties"] is False
    assert schema["$defs"]["_Inner"]["additionalProperties"] is False
    assert schema["properties"]["items"]["items"] == {"$ref": "#/$defs/_Inner"}
