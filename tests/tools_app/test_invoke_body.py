"""POST /tools/{id}/invoke/'s body: `InvokeIn.validated` gives what the serializer's `is_valid` gives, or the same
error, for every body; a plain body is read without the serializer (`plain_invoke`), the rest go through it."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.exceptions import ValidationError

from tools_app.api.serializers import InvokeIn, plain_invoke

PLAIN: list[Any] = [
    {"function": "get_inventory", "arguments": {"sku": "DEMO-001"}},
    {"function": "get_inventory"},
    {"function": "  padded\t\n", "arguments": {}},
    {"function": "f" * 128},
    {"function": " " + "f" * 128 + " "},  # 128 once stripped, as the CharField measures it
    {"function": "x", "dry_run": True},
    {"function": "x", "dry_run": False, "arguments": {"a": None, "b": [1, {"c": 2}], "": ""}},
    {"arguments": {"n": 1.5}, "function": "x"},  # order of the body's keys does not matter
    {"function": "\u00a0x\u2003"},  # unicode spaces around: stripped to "x" as the CharField strips them
]
SERIALIZER: list[Any] = [
    {"function": "f" * 129},
    {"function": " " * 3},
    {"function": ""},
    {"function": "nul\x00inside"},
    {"function": "lone\ud800surrogate"},
    {"function": "café"},  # not ASCII: the serializer decides (it takes it)
    {"function": 5},  # the CharField takes a number as its text
    {"function": 1.5},
    {"function": True},
    {"function": None},
    {"function": ["x"]},
    {"arguments": {"a": 1}},
    {"function": "x", "arguments": None},
    {"function": "x", "arguments": ["a"]},
    {"function": "x", "arguments": "a=1"},
    {"function": "x", "arguments": {1: "int key"}},
    {"function": "x", "dry_run": "true"},
    {"function": "x", "dry_run": 1},
    {"function": "x", "dry_run": None},
    {"function": "x", "extra": 1},
    {"function": "x", "Function": "y"},
    [],
    "function=x",
    None,
    {},
]


def _serializer(data: Any) -> tuple[str, Any]:
    body = InvokeIn(data=data)
    try:
        body.is_valid(raise_exception=True)
    except ValidationError as exc:
        return "error", exc.detail
    return "ok", dict(body.validated_data)


def _validated(data: Any) -> tuple[str, Any]:
    try:
        return "ok", InvokeIn.validated(data)
    except ValidationError as exc:
        return "error", exc.detail


@pytest.mark.parametrize("data", PLAIN + SERIALIZER, ids=repr)
def test_validated_is_the_serializers_answer(data: Any) -> None:
    assert _validated(data) == _serializer(data)


@pytest.mark.parametrize("data", PLAIN, ids=repr)
def test_a_plain_body_skips_the_serializer(data: Any) -> None:
    assert plain_invoke(data) == _serializer(data)[1]
    got = InvokeIn.validated(data)
    assert list(got) == ["function", "arguments", "dry_run"]  # the serializer's keys, in its order


@pytest.mark.parametrize("data", SERIALIZER, ids=repr)
def test_anything_else_is_left_to_the_serializer(data: Any) -> None:
    assert plain_invoke(data) is None


def test_the_arguments_are_a_new_dict_of_the_same_values() -> None:
    nested = {"deep": [1, 2]}
    data = {"function": "x", "arguments": {"n": nested}}
    fast, slow = InvokeIn.validated(data), _serializer(data)[1]
    assert fast["arguments"] is not data["arguments"] and slow["arguments"] is not data["arguments"]
    assert fast["arguments"]["n"] is nested and slow["arguments"]["n"] is nested
