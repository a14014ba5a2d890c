"""The runner wire's JSON: the same as dataclasses.asdict wrote, without its deep copies on every call."""

from __future__ import annotations

import dataclasses
import json

from tools_app.runtime.mcp.spec import LocalSpec, ServerSpec
from tools_app.runtime.result import ToolResult
from tools_app.runtime.runner.wire import (
    encoded,
    event_line,
    result_from_json,
    result_to_json,
    spec_from_json,
    spec_to_json,
)
from tools_app.runtime.sandbox import SandboxPolicy, ServerSandbox


@dataclasses.dataclass
class _Nested:
    name: str
    values: list[int]


def _spec(version: int = 1, env: str = "a") -> ServerSpec:
    box = ServerSandbox(policy=SandboxPolicy(extra_ro_paths=("/opt/x",)), tenant_key="1", workspace="/tmp/w", uid=5)
    return ServerSpec(tool_id=7, config_version=version, tenant_key="1",
                      target=LocalSpec(command="python", args=("s.py",), env=(("K", env),), sandbox=box))


def test_a_result_is_written_as_asdict_wrote_it() -> None:
    result = ToolResult.ok(data={"rows": [1, 2], "when": "é"}, text="t\u2028x", content=[{"type": "text", "text": "t"}],
                           nested=_Nested("n", [1]), items=[_Nested("m", [])])
    written = json.loads(encoded({"result": result_to_json(result)}))
    assert written == json.loads(json.dumps({"result": dataclasses.asdict(result)}))
    assert result_from_json(written["result"]) == dataclasses.replace(
        result, meta={"nested": {"name": "n", "values": [1]}, "items": [{"name": "m", "values": []}]})
    line = event_line({"result": result_to_json(result)})
    assert line.endswith(b"\n") and line.count(b"\n") == 1 and line.isascii()
    assert json.loads(line) == written


def test_a_result_is_not_copied_but_not_changed_either() -> None:
    result = ToolResult.ok(data={"a": 1})
    before = dataclasses.asdict(result)
    encoded(result_to_json(result))
    assert dataclasses.asdict(result) == before


def test_a_spec_is_written_once_per_equal_spec() -> None:
    first = spec_to_json(_spec())
    assert first == dataclasses.asdict(_spec())
    assert spec_to_json(_spec()) is first  # an equal spec: the same JSON, not walked again
    changed = spec_to_json(_spec(env="b"))
    assert changed is not first and changed["target"]["env"] == (("K", "b"),)
    assert spec_to_json(_spec(version=2))["config_version"] == 2
    assert spec_from_json(json.loads(json.dumps(first))) == _spec()


def test_a_spec_read_again_is_the_one_built_before_unless_its_json_changed() -> None:
    raw = json.loads(json.dumps(spec_to_json(_spec())))
    first = spec_from_json(raw)
    assert first == _spec()
    assert spec_from_json(json.loads(json.dumps(raw))) is first
    changed = json.loads(json.dumps(spec_to_json(_spec(env="c"))))  # same key (tool, version, tenant), new env
    assert spec_from_json(changed) == _spec(env="c")
    again = spec_from_json(raw)
    assert again == _spec() and isinstance(again.target, LocalSpec) and again.target.env == (("K", "a"),)

