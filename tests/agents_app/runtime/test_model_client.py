"""The model client alone: streamed turn assembly and key-free, typed errors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx2
import pytest

from agents_app.runtime.model_client import ModelClient, ModelError, ModelTurn
from core.codes import ApiCode
from core.outbound import GuardedTransport
from tests.agents_app.runtime.support import API_KEY, config_for
from tests.fixtures.fake_llm import FakeLLM, Turn, calls, text
from tools_app.wiring.http import outbound_policy

FakeFactory = Callable[..., FakeLLM]
USER = [{"role": "user", "content": "hi"}]


def test_interleaved_parallel_tool_call_deltas_assemble_by_index(fake_llm: FakeFactory) -> None:
    long_args = {"sku": "A-" + "9" * 40, "note": "x" * 30}
    llm = fake_llm([calls(("a__one", long_args), ("b__two", {"sku": "B-2"}), content="Looking up.")])
    with ModelClient(config_for(llm)) as client:
        items = list(client.stream_turn(USER, []))
    turn = items[-1]
    assert isinstance(turn, ModelTurn)
    assert "".join(i for i in items if isinstance(i, str)) == "Looking up." == turn.content
    assert [(c.name, c.arguments) for c in turn.tool_calls] == [
        ("a__one", '{"sku": "A-' + "9" * 40 + '", "note": "' + "x" * 30 + '"}'),
        ("b__two", '{"sku": "B-2"}'),
    ]
    assert turn.finish_reason == "tool_calls"
    assert turn.as_message()["tool_calls"][1]["function"] == {"name": "b__two", "arguments": '{"sku": "B-2"}'}
    assert "tools" not in llm.requests[0]  # no empty tools list for servers that reject it


def test_auth_error_never_carries_the_key(fake_llm: FakeFactory) -> None:
    llm = fake_llm([text("x")], api_key="sk-expected")
    config = config_for(llm, api_key=API_KEY)
    with ModelClient(config) as client, pytest.raises(ModelError) as info:
        list(client.stream_turn(USER, []))
    assert info.value.code == ApiCode.MODEL_AUTH
    assert API_KEY not in str(info.value) and API_KEY not in repr(info.value)
    assert API_KEY not in repr(config)


def test_turns_over_the_guarded_client_keep_one_connection(fake_llm: FakeFactory) -> None:
    """The SDK's stream stops reading at `data: [DONE]`; the body's end is read before the close, so the connection
    goes back to the pool instead of being dropped (a new TCP, and TLS, handshake per turn). Same answers."""
    llm = fake_llm([text("one"), calls(("a__one", {"sku": "A"})), text("three")])
    with httpx2.Client(transport=GuardedTransport(outbound_policy()), trust_env=False) as http:
        turns: list[ModelTurn] = []
        for _ in range(3):
            with ModelClient(config_for(llm), http_client=http) as client:
                last = list(client.stream_turn(USER, []))[-1]
            assert isinstance(last, ModelTurn)
            turns.append(last)
    assert [t.content for t in turns] == ["one", "", "three"]
    assert [c.name for c in turns[1].tool_calls] == ["a__one"]
    assert len(llm.peers) == 3 and len(set(llm.peers)) == 1


def test_a_body_that_does_not_end_after_done_is_not_waited_for(fake_llm: FakeFactory) -> None:
    """The read after [DONE] is bounded (0.1 s): a server that holds the body open after it is left, and the
    connection dropped as before, rather than the turn waiting for the server."""
    llm = fake_llm([text("one", linger_s=1.0), text("two")])
    with httpx2.Client(transport=GuardedTransport(outbound_policy()), trust_env=False) as http:
        answers = []
        for _ in range(2):
            with ModelClient(config_for(llm), http_client=http) as client:
                answers.append(list(client.stream_turn(USER, []))[:-1])
    assert answers == [["one"], ["two"]]
    assert len(set(llm.peers)) == 2  # the lingering body's connection was not kept


class _RawChunks(FakeLLM):
    """A model server streaming the given chunks as they are (odd ones included)."""

    def __init__(self, chunks: list[Any]) -> None:
        super().__init__([text("")], api_key=API_KEY)
        self.raw = chunks

    def _chunks(self, turn: Turn, body: dict[str, Any]) -> list[dict[str, Any]]:
        return self.raw


def test_odd_chunks_read_as_the_sdk_models_read_them() -> None:
    """Chunks are read as their JSON: a missing key reads None (as on the SDK's models, built without validation),
    other choices than the first are skipped, a repeated whole name is kept once, a value of the wrong kind fails
    the turn typed. The same test passes on the SDK's models (the code before this reading)."""
    tool = {"index": 0, "id": "c1", "type": "function", "function": {"name": "a__one", "arguments": ""}}
    chunks = [
        {"id": "x", "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]},
        {"id": "x"},  # no choices
        {"id": "x", "choices": [{"index": 0, "finish_reason": None}]},  # no delta
        {"id": "x", "choices": [{"index": 1, "delta": {"content": "not the first choice"}}]},
        {"id": "x", "choices": [{"delta": {"content": "Hi"}}]},  # no index: the first choice
        {"id": "x", "choices": [{"index": 0, "delta": {"tool_calls": [tool]}}]},
        {"id": "x", "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0}]}}]},  # no function
        {"id": "x", "choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "function": {"name": "a__one", "arguments": '{"sku": '}}]}}]},  # the name repeated whole
        {"id": "x", "choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "function": {"arguments": '"A"}'}}]}, "finish_reason": "tool_calls"}]},
    ]
    with _RawChunks(chunks) as llm, ModelClient(config_for(llm)) as client:
        items = list(client.stream_turn(USER, []))
    turn = items[-1]
    assert isinstance(turn, ModelTurn) and items[:-1] == ["Hi"] and turn.content == "Hi"
    assert [(c.id, c.name, c.arguments) for c in turn.tool_calls] == [("c1", "a__one", '{"sku": "A"}')]
    assert turn.finish_reason == "tool_calls"

    with _RawChunks([{"id": "x", "choices": ["a string", {"delta": {"content": "ok"}}]}]) as llm, \
            ModelClient(config_for(llm)) as client:
        assert list(client.stream_turn(USER, []))[:-1] == ["ok"]  # a string choice is skipped, as before
    for odd in ({"id": "x", "choices": [None]}, {"id": "x", "choices": [{"delta": "text"}]}, ["a list"]):
        with _RawChunks([odd]) as llm, ModelClient(config_for(llm)) as client, pytest.raises(ModelError) as info:
            list(client.stream_turn(USER, []))
        assert info.value.code == ApiCode.MODEL_ERROR


def test_streams_text_incrementally(fake_llm: FakeFactory) -> None:
    llm = fake_llm([Turn(text="one two three four", chunk_delay_s=0.05)])
    with ModelClient(config_for(llm)) as client:
        stream = client.stream_turn(USER, [])
        assert next(stream) == "one "  # arrives before the rest of the reply has been produced
        rest = list(stream)
    assert isinstance(rest[-1], ModelTurn) and rest[-1].content == "one two three four"


def test_process_openai_environment_does_not_reach_the_endpoint(
    fake_llm: FakeFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_ORG_ID", "org-deployment")
    monkeypatch.setenv("OPENAI_PROJECT_ID", "proj-deployment")
    monkeypatch.setenv("OPENAI_CUSTOM_HEADERS", "X-Internal-Token: deployment-secret")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-deployment")
    llm = fake_llm([text("ok")])
    with ModelClient(config_for(llm)) as client:
        list(client.stream_turn(USER, []))
    sent = llm.headers[0]
    assert sent["authorization"] == f"Bearer {API_KEY}"
    assert "deployment" not in repr(sent)


def test_wire_messages_attach_images_after_their_tool_block_for_vision_models_only() -> None:
    from agents_app.runtime.model_client import wire_messages

    png = {"mimeType": "image/png", "data": "iVBORw0KGgo="}
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "look"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "a"}, {"id": "b"}]},
        {"role": "tool", "tool_call_id": "a", "content": "[image: image/png, 8 bytes]", "_images": [png]},
        {"role": "tool", "tool_call_id": "b", "content": "text only"},
        {"role": "assistant", "content": "done"},
    ]
    sent = wire_messages(messages, vision=True)
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "tool", "user", "assistant"]
    assert all("_images" not in m for m in sent)
    assert sent[4]["content"][1] == {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
    plain = wire_messages(messages, vision=False)
    assert [m["role"] for m in plain] == ["user", "assistant", "tool", "tool", "assistant"]
    assert all("_images" not in m for m in plain)
    assert messages[2]["_images"] == [png]  # the transcript itself is left as it is


def test_the_request_body_is_sent_as_built(fake_llm: FakeFactory) -> None:
    """The body goes out without the SDK's per-value transform (model_client._create_stream): the messages, the
    tools' schemas and the model's extra parameters arrive as the loop built them, and nothing else is added."""
    schema = {"type": "object", "properties": {"sku": {"type": "string", "description": "the SKU"},
                                               "when": {"type": "string", "format": "date"}}, "required": ["sku"]}
    tools = [{"type": "function", "function": {"name": "inv__get", "description": "stock", "parameters": schema}}]
    messages: list[dict[str, Any]] = [{"role": "system", "content": "be brief"}, *USER,
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "inv__get", "arguments": '{"sku": "A"}'}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "12"}]
    llm = fake_llm([text("ok")])
    config = config_for(llm, params={"temperature": 0.25, "top_p": 0.5})
    with ModelClient(config) as client:
        items = list(client.stream_turn(messages, tools))
    assert isinstance(items[-1], ModelTurn) and items[-1].content == "ok"
    sent = llm.requests[0]
    assert sent["model"] == "fake-model" and sent["stream"] is True
    assert sent["tools"] == tools and sent["messages"] == messages
    assert (sent["temperature"], sent["top_p"]) == (0.25, 0.5)
    assert set(sent) == {"model", "stream", "messages", "tools", "temperature", "top_p"}
    assert llm.headers[0]["authorization"] == f"Bearer {API_KEY}"
