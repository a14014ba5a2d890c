"""server_spec (from a config spec), validate_arguments and schema_hash: pure functions, no processes."""

from __future__ import annotations

import copy

import pytest

from tools_app.configs import server_spec as spec_from_config
from tools_app.errors import InvalidConfig
from tools_app.runtime.errors import InvalidParams
from tools_app.runtime.mcp import LocalSpec, RemoteSpec
from tools_app.runtime.schemas import schema_hash, validate_arguments

SCHEMA = {"type": "object", "properties": {"sku": {"type": "string"}, "n": {"type": "integer"}}, "required": ["sku"]}


def test_local_spec_from_config() -> None:
    spec = spec_from_config(
        tool_id=3, config_version=7, tenant_key="acme", tool_type="LOCAL",
        config={"command": "python", "args": ["-m", "srv"], "env": {"B": "2", "A": "1"}, "cwd": "/tmp",
                "startup_timeout_s": 5, "call_timeout_s": 9},
    )
    assert spec.key == (3, 7, "")
    assert spec.target == LocalSpec(command="python", args=("-m", "srv"), env=(("A", "1"), ("B", "2")), cwd="/tmp",
                                    startup_timeout_s=5, call_timeout_s=9)


def test_remote_spec_from_config_and_repr_hides_secrets() -> None:
    spec = spec_from_config(
        tool_id=1, config_version=1, tenant_key="acme", tool_type="REMOTE",
        config={"url": "https://mcp.example.com/mcp", "transport": "sse", "headers": {"Authorization": "Bearer s3cr3t"}},
    )
    assert isinstance(spec.target, RemoteSpec) and spec.target.transport == "sse"
    assert "s3cr3t" not in repr(spec)
    local = spec_from_config(tool_id=1, config_version=1, tenant_key="a", tool_type="LOCAL",
                             config={"command": "x", "env": {"API_KEY": "hunter2"}})
    assert "hunter2" not in repr(local)


@pytest.mark.parametrize(
    "tool_type,config",
    [("LOCAL", {}), ("LOCAL", {"command": "x", "args": "nope"}), ("REMOTE", {"url": ""}),
     ("REMOTE", {"url": "http://x", "transport": "websocket"}), ("HTTP", {"url": "http://x"}),
     ("LOCAL", {"command": "x", "call_timeout_s": -1})],
)
def test_bad_config_is_invalid_config(tool_type: str, config: dict) -> None:
    with pytest.raises(InvalidConfig):
        spec_from_config(tool_id=1, config_version=1, tenant_key="a", tool_type=tool_type, config=config)


def test_validate_arguments_accepts_valid() -> None:
    validate_arguments(SCHEMA, {"sku": "DEMO-001", "n": 2})  # raises when invalid


def test_unknown_argument_names_the_accepted_ones_even_without_additional_properties_false() -> None:
    with pytest.raises(InvalidParams) as info:
        validate_arguments(SCHEMA, {"sku": "a", "skux": 1})
    assert info.value.code == "invalid_params" and info.value.details == {"unknown": ["skux"], "accepted": ["n", "sku"]}


def test_type_and_required_errors() -> None:
    with pytest.raises(InvalidParams) as wrong_type:
        validate_arguments(SCHEMA, {"sku": "a", "n": "two"})
    assert wrong_type.value.code == "invalid_params" and wrong_type.value.details["path"] == ["n"]
    with pytest.raises(InvalidParams) as missing:
        validate_arguments(SCHEMA, {})
    assert missing.value.code == "invalid_params" and missing.value.details["path"] == []
    assert "'sku'" in missing.value.message  # a missing argument has no path: the message names it


def test_free_form_schema_accepts_any_names() -> None:
    validate_arguments({"type": "object", "additionalProperties": True}, {"anything": 1})  # raises when invalid


def test_schema_hash_is_canonical_and_sensitive() -> None:
    a = schema_hash(name="f", description="d", input_schema={"a": 1, "b": 2}, output_schema=None, annotations=None)
    b = schema_hash(name="f", description="d", input_schema={"b": 2, "a": 1}, output_schema=None, annotations=None)
    assert a == b and len(a) == 64
    assert a != schema_hash(name="f", description="d2", input_schema={"a": 1, "b": 2})
    assert a != schema_hash(name="f", description="d", input_schema={"a": 1, "b": 2},
                            annotations={"readOnlyHint": True})


def _counting_checks(monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    from tools_app.runtime import schemas

    checked: list[dict] = []
    original = schemas._check

    def counted(schema: dict, key: str, arguments: dict) -> None:
        checked.append(arguments)
        original(schema, key, arguments)

    monkeypatch.setattr(schemas, "_check", counted)
    return checked


def _in_fresh_context(fn: object) -> None:
    import contextvars

    contextvars.Context().run(fn)  # type: ignore[arg-type]


def test_the_same_arguments_against_the_same_schema_content_are_checked_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The invoke service's check and the runtime's (the live listing's schema, an equal copy) are one check."""
    checked = _counting_checks(monkeypatch)

    def calls() -> None:
        arguments = {"sku": "A", "n": 2}
        validate_arguments(SCHEMA, arguments)
        validate_arguments(copy.deepcopy(SCHEMA), arguments)  # equal content, another object
        assert checked == [arguments]

    _in_fresh_context(calls)


def test_what_differs_is_checked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    checked = _counting_checks(monkeypatch)

    def calls() -> None:
        arguments = {"sku": "A", "n": 2}
        validate_arguments(SCHEMA, arguments)
        validate_arguments({**SCHEMA, "required": ["sku", "n"]}, arguments)  # another schema
        validate_arguments(SCHEMA, {"sku": "A", "n": 2})  # equal arguments, another object
        assert len(checked) == 3
        arguments["n"] = "two"  # the same object, changed since: checked, and refused
        with pytest.raises(InvalidParams, match="invalid argument n"):
            validate_arguments(SCHEMA, arguments)
        assert len(checked) == 4

    _in_fresh_context(calls)


def test_a_refusal_is_never_remembered(monkeypatch: pytest.MonkeyPatch) -> None:
    checked = _counting_checks(monkeypatch)

    def calls() -> None:
        arguments = {"n": 2}
        for _ in range(2):
            with pytest.raises(InvalidParams, match="sku"):
                validate_arguments(SCHEMA, arguments)
        assert len(checked) == 2

    _in_fresh_context(calls)


def test_another_context_checks_for_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker job runs in a copy of its caller's context: what one call's job found is not another's."""
    checked = _counting_checks(monkeypatch)
    arguments = {"sku": "A"}
    _in_fresh_context(lambda: validate_arguments(SCHEMA, arguments))
    _in_fresh_context(lambda: validate_arguments(SCHEMA, arguments))
    assert len(checked) == 2


@pytest.mark.parametrize("value", [object(), float("nan"), "x" * 257, [1, 2], {"nested": 1}],
                         ids=["not-json", "nan", "long-text", "list", "object"])
def test_large_nested_or_non_json_arguments_are_checked_every_time(monkeypatch: pytest.MonkeyPatch,
                                                                    value: object) -> None:
    """Only small flat arguments are remembered (their JSON is cheap and exact); the rest are checked each time."""
    checked = _counting_checks(monkeypatch)
    free = {"type": "object", "additionalProperties": True}

    def calls() -> None:
        arguments = {"value": value}
        validate_arguments(free, arguments)
        validate_arguments(free, arguments)
        assert len(checked) == 2

    _in_fresh_context(calls)
