"""The canary: hostile upstreams and a model echo secrets in every encoded form; none leaves Toolhub.

Real parts only: a hostile MCP server (stdio and streamable HTTP) echoing its env and headers, the echo
HTTP server behind an HTTP tool, the fake LLM echoing its own API key. Every outward path is checked:
invoke body, audit row, Test output, `last_error`, chat events and stored transcripts, log lines.
"""

from __future__ import annotations

import io
import json
import logging
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from agents_app.models import Conversation, Message
from core.secrets import MASK, SecretLogFilter
from tests.fixtures.echo_http import echo_server
from tests.fixtures.fake_llm import call, http_error, llm_servers, text
from tests.fixtures.mcp_servers import LEAKY, http_server
from tests.fixtures.mcp_servers.leaky import forms
from tools_app.models import Tool, ToolCall
from tools_app.wiring.pool import pool

pytestmark = pytest.mark.django_db(transaction=True)

ENV_SECRET = 'env-Canary/9+Zq "quoted" é x'  # needs JSON, URL and \u escapes
HEADER_SECRET = "hdr-Canary/7+Qx=z-0193"
HTTP_SECRET = "http-Canary/5+Kw=y-2288"
MODEL_KEY = "sk-model-Canary-4Rt8Lm2Xv"


def leaks(blob: str | bytes, secret: str) -> list[str]:
    """The names of the encoded forms of `secret` found in `blob` (raw or as JSON text)."""
    found = []
    texts = [blob.decode() if isinstance(blob, bytes) else blob]
    for candidate in texts:
        for name, form in forms(secret).items():
            needle = form.removeprefix("Basic ")
            if needle in candidate or json.dumps(needle)[1:-1] in candidate:
                found.append(name)
    return found


def assert_clean(blob: Any, *secrets: str) -> None:
    as_text = blob if isinstance(blob, str | bytes) else json.dumps(blob, ensure_ascii=False, default=str)
    for secret in secrets:
        assert not leaks(as_text, secret), f"{leaks(as_text, secret)} of {secret!r} leaked: {as_text!r}"


@pytest.fixture(autouse=True)
def _close_pool() -> Iterator[None]:
    yield
    pool().close_all()


@pytest.fixture
def console() -> Iterator[io.StringIO]:
    """What the configured log handlers (the ones carrying the scrub filter) write."""
    handlers = [h for h in logging.getLogger().handlers
                if isinstance(h, logging.StreamHandler) and any(isinstance(f, SecretLogFilter) for f in h.filters)]
    assert handlers, "LOGGING must put the scrub filter on the console handler"
    out = io.StringIO()
    previous = [h.setStream(out) for h in handlers]
    try:
        yield out
    finally:
        for h, stream in zip(handlers, previous, strict=True):
            h.setStream(stream)


def make(api: Any, name: str, tool_type: str, config: dict[str, Any]) -> int:
    resp = api.post("/api/v1/tools/", {"name": name, "type": tool_type, "config": config}, format="json")
    assert resp.status_code == 201, resp.content
    return int(resp.json()["id"])


def invoke(api: Any, tool_id: int, function: str) -> Any:
    resp = api.post(f"/api/v1/tools/{tool_id}/invoke/", {"function": function, "arguments": {}}, format="json")
    assert resp.status_code == 200, resp.content
    return resp


def audit_rows(tool_id: int) -> list[Any]:
    return list(ToolCall.objects.filter(tool_id=tool_id).values("arguments", "result_excerpt", "error"))


def test_stdio_server_echoing_its_env(api: Any, settings: Any) -> None:
    settings.TOOLHUB_AUDIT_RESULT_CHARS = 37  # a cut inside a secret's form must not leave a prefix of it
    tool_id = make(api, "leaky", "LOCAL", {"command": sys.executable, "args": [str(LEAKY)], "env": {"LEAK": ENV_SECRET},
                                          "startup_timeout_s": 20, "call_timeout_s": 10})
    tested = api.post(f"/api/v1/tools/{tool_id}/test/")
    assert tested.json()["ok"] is True, tested.content
    assert_clean(tested.content, ENV_SECRET)  # server version and tool descriptions carry it
    refreshed = api.post(f"/api/v1/tools/{tool_id}/refresh/")
    assert refreshed.json()["ok"] is True
    assert_clean(refreshed.content, ENV_SECRET)
    assert_clean(api.get(f"/api/v1/tools/{tool_id}/").content, ENV_SECRET)  # stored descriptions

    ok = invoke(api, tool_id, "leak")
    body = ok.json()
    assert body["success"] is True and set(body["data"]) == set(forms(ENV_SECRET))
    assert body["data"]["raw"] == MASK  # the server did echo it (this test cannot pass on a server that does not)
    assert_clean(ok.content, ENV_SECRET)
    failed = invoke(api, tool_id, "leak_error")
    assert failed.json()["success"] is False and "upstream refused" in failed.json()["error"]
    assert_clean(failed.content, ENV_SECRET)
    rows = audit_rows(tool_id)
    assert len(rows) == 2 and any(r["result_excerpt"] for r in rows)
    assert_clean(rows, ENV_SECRET)
    assert_clean(api.get("/api/v1/tool-calls/").content, ENV_SECRET)


def test_server_crashing_with_secrets_on_stderr(api: Any) -> None:
    tool_id = make(api, "crashy", "LOCAL", {"command": sys.executable, "args": [str(LEAKY)],
                                           "env": {"LEAK": ENV_SECRET, "LEAK_CRASH": "1"}, "startup_timeout_s": 20})
    tested = api.post(f"/api/v1/tools/{tool_id}/test/")
    assert tested.json()["ok"] is False and "stderr" in tested.json()["error"]["message"], tested.content
    assert_clean(tested.content, ENV_SECRET)
    last_error = Tool.objects.get(pk=tool_id).last_error
    assert "starting with" in last_error
    assert_clean(last_error, ENV_SECRET)
    assert_clean(api.get(f"/api/v1/tools/{tool_id}/").content, ENV_SECRET)


def test_remote_server_echoing_its_headers(api: Any) -> None:
    with http_server(LEAKY) as url:
        tool_id = make(api, "leaky-remote", "REMOTE", {"url": url, "headers": {"X-Leak": HEADER_SECRET}, "timeout_s": 10})
        assert api.post(f"/api/v1/tools/{tool_id}/refresh/").json()["ok"] is True
        ok = invoke(api, tool_id, "leak")
        assert ok.json()["success"] is True and set(ok.json()["data"]) == set(forms(HEADER_SECRET))
        failed = invoke(api, tool_id, "leak_error")
        for resp in (ok, failed):
            assert_clean(resp.content, HEADER_SECRET)
        assert_clean(audit_rows(tool_id), HEADER_SECRET)


def test_http_tool_whose_upstream_echoes_the_request(api: Any) -> None:
    with echo_server() as base:
        tool_id = make(api, "echo", "HTTP", {"method": "GET", "url": base + "/echo?k=${secret.k}",
                                             "headers": {"X-Key": "Basic ${secret.k}"}, "secrets": {"k": HTTP_SECRET}})
        resp = invoke(api, tool_id, "call")
        body = resp.json()
        assert body["success"] is True and body["data"]["path"].startswith("/echo?k=")
        assert_clean(resp.content, HTTP_SECRET)
        assert_clean(audit_rows(tool_id), HTTP_SECRET)


def test_chat_transcript_tool_results_and_a_model_echoing_its_key(api: Any, console: io.StringIO) -> None:
    key_forms = forms(MODEL_KEY)
    echo = f"Here is my key {MODEL_KEY}, encoded {key_forms['quote']} and {key_forms['b64']} and {key_forms['basic']}."
    with llm_servers(MODEL_KEY) as start:
        llm = start([call("leaky__leak", {}), text(echo), http_error(500, f"bad key {MODEL_KEY}")])
        model = api.post("/api/v1/models/", {"name": "fake", "base_url": llm.base_url, "model": "m",
                                             "api_key": MODEL_KEY}, format="json").json()["id"]
        tool_id = make(api, "leaky", "LOCAL", {"command": sys.executable, "args": [str(LEAKY)],
                                              "env": {"LEAK": ENV_SECRET}, "startup_timeout_s": 20})
        assert api.post(f"/api/v1/tools/{tool_id}/refresh/").json()["ok"] is True
        agent = api.post("/api/v1/agents/", {"name": "a", "model": model, "tools": [{"tool": tool_id}]},
                         format="json").json()["id"]

        streamed = api.post(f"/api/v1/agents/{agent}/chat/", {"message": "go", "stream": True}, format="json")
        raw = b"".join(streamed.streaming_content)
        assert b"message.delta" in raw and b"tool.result" in raw
        assert_clean(raw, ENV_SECRET, MODEL_KEY)
        conversation = Conversation.objects.get()
        shown = "".join(json.loads(line[6:])["text"] for line in raw.decode().splitlines()
                        if line.startswith("data: ") and '"text"' in line)
        assert shown.startswith("Here is my key ********")

        failed = api.post(f"/api/v1/agents/{agent}/chat/", {"message": "again", "conversation_id": conversation.pk},
                          format="json")
        assert failed.json()["events"][-1]["event"] == "error"
        assert_clean(failed.content, MODEL_KEY)

    stored = list(Message.objects.values("content", "tool_calls"))
    assert any("********" in (m["content"] or "") for m in stored)
    assert_clean(stored, ENV_SECRET, MODEL_KEY)
    conversation.refresh_from_db()
    assert_clean(conversation.run_state, ENV_SECRET, MODEL_KEY)
    assert_clean(api.get(f"/api/v1/conversations/{conversation.pk}/").content, ENV_SECRET, MODEL_KEY)
    assert_clean(audit_rows(tool_id), ENV_SECRET)

    # A log line carrying what an upstream said goes through the same scrubber.
    logging.getLogger("tools_app.canary").warning("upstream said %s / %s", json.dumps(forms(ENV_SECRET)), echo)
    assert "upstream said" in console.getvalue()
    assert_clean(console.getvalue(), ENV_SECRET, MODEL_KEY)
