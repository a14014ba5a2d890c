"""OpenAI-compatible chat model client: one streamed turn at a time, errors typed and key-free."""

from __future__ import annotations

import functools
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, cast
from urllib.parse import urlsplit

import httpx2

if TYPE_CHECKING:
    import openai

from core.codes import ApiCode
from core.outbound import deadline_at, honours_deadline, ssl_context
from core.process_state import PerProcess
from core.secrets import scrub_text

ModelErrorCode = Literal[ApiCode.MODEL_UNREACHABLE, ApiCode.MODEL_AUTH, ApiCode.MODEL_ERROR, ApiCode.MODEL_TIMEOUT]

# Keys the loop owns; a ChatModel's `params` must not override them.
RESERVED_PARAMS = frozenset({"model", "messages", "tools", "stream", "stream_options", "n"})
# Model settings Toolhub reads itself and never sends: `max_tools` (functions per request, default 128) and
# `supports_vision` (true: tool images are handed to the model as image parts).
TOOLHUB_PARAMS = frozenset({"max_tools", "supports_vision"})
# Transcript keys Toolhub keeps beside a message and never sends as they are (see `wire_messages`).
IMAGES_KEY = "_images"


@dataclass(frozen=True)
class ModelConfig:
    """Where and how to reach a chat model; `params` (temperature, max_tokens, ...) go in the body."""

    base_url: str
    model: str
    api_key: str = field(default="", repr=False)
    params: dict[str, Any] = field(default_factory=dict)
    timeout_s: float = 60.0

    @property
    def vision(self) -> bool:
        """The model accepts image content parts (the ChatModel's `supports_vision` setting)."""
        return self.params.get("supports_vision") is True


class ModelError(Exception):
    """A model call that failed; `message` never contains the API key."""

    def __init__(self, code: ModelErrorCode, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code: ModelErrorCode = code
        self.message = message


@dataclass
class ToolCallRequest:
    """One function call the model asked for; `arguments` is the raw JSON text as streamed."""

    id: str
    name: str
    arguments: str


@dataclass
class ModelTurn:
    """One assembled assistant turn."""

    content: str = ""
    tool_calls: list[ToolCallRequest] = field(default_factory=list)
    finish_reason: str | None = None

    def as_message(self) -> dict[str, Any]:
        """The OpenAI-format assistant message to append to the transcript."""
        message: dict[str, Any] = {"role": "assistant", "content": self.content or None}
        if self.tool_calls:
            message["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in self.tool_calls
            ]
        return message


def wire_messages(messages: list[dict[str, Any]], vision: bool) -> list[dict[str, Any]]:
    """The transcript as sent: Toolhub's own keys dropped; for a vision model, the images of each block of
    tool answers follow it as one user message of `image_url` parts (data URLs).

    OpenAI-compatible servers accept only text in `role: tool` messages, so images travel in a user message
    right after the answers they belong to; it is built per request and never stored, so it counts as no
    turn of the conversation.
    """
    out: list[dict[str, Any]] = []
    pending: list[dict[str, Any]] = []

    def flush() -> None:
        if pending:
            out.append({"role": "user", "content": [
                {"type": "text", "text": "The images returned by the tool calls above, in order:"}, *pending]})
            pending.clear()

    for message in messages:
        if message.get("role") != "tool":
            flush()
        images = message.get(IMAGES_KEY)
        if images is None:
            out.append(message)
            continue
        out.append({k: v for k, v in message.items() if k != IMAGES_KEY})
        if vision:
            for image in images:
                pending.append({"type": "image_url",
                                "image_url": {"url": f"data:{image['mimeType']};base64,{image['data']}"}})
    flush()
    return out


def _host(base_url: str) -> str:
    # Only host:port: a base URL may carry credentials in its userinfo or query.
    parts = urlsplit(base_url)
    return parts.hostname + (f":{parts.port}" if parts.port else "") if parts.hostname else "model endpoint"


def _scrub(text: str, secret: str) -> str:
    # Scrub the whole text first: a cut could leave a prefix of the key that no longer matches.
    return scrub_text(text, [secret])[:300]


def _status_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return cast(str, err["message"])
        if isinstance(err, str):
            return err
    return ""


def _sdk() -> Any:
    """The OpenAI SDK, imported on first use: it is a fifth of a Django start-up's imports, which every process paid
    (runners, workers, management commands) while only a chat turn needs it. `config/asgi.py` imports it at start."""
    import openai

    return openai


# After `data: [DONE]` an HTTP/1.1 body still has its end to come (the chunked terminator, as a rule in the same
# packet). The SDK's sync stream closes the response right there, which drops the connection: every chat turn opened
# a new one (TCP and, to a real provider, TLS). Its async stream first reads the rest, for up to 0.1 s; so do we.
_DRAIN_S = 0.1
_DRAIN_BYTES = 64 * 1024


def _drain(response: httpx2.Response) -> None:
    """Read what is left of a finished stream's body, so that closing it gives the connection back to the pool.

    Bounded (0.1 s, 64 KiB) and only over a connection whose reads honour `deadline_at` (the guarded client's): a
    server that sends more, or nothing, keeps the old outcome (the close drops the connection)."""
    if response.http_version != "HTTP/1.1" or not honours_deadline(response.extensions.get("network_stream")):
        return
    left = _DRAIN_BYTES
    try:
        with deadline_at(time.monotonic() + _DRAIN_S):
            for part in response.stream:  # type: ignore[union-attr]  # a sync client's stream
                left -= len(part)
                if left < 0:
                    return
    except (httpx2.HTTPError, httpx2.StreamError):
        return


@functools.cache
def _chunk_stream() -> Any:
    """The SDK's stream of chunks as their JSON (`Stream[object]`), reading the body's end after [DONE] (`_drain`).

    Not `Stream[ChatCompletionChunk]`: building the SDK's model of every chunk (`construct_type`, no validation) was
    about a sixth of a chat turn's CPU in the web worker, for the four keys `stream_turn` reads."""
    sdk = _sdk()
    base: Any = sdk.Stream[object]

    class ChunkStream(base):  # type: ignore[misc]  # the SDK is imported on first use
        def _iter_events(self) -> Iterator[Any]:
            for sse in super()._iter_events():
                if sse.data.startswith("[DONE]"):
                    _drain(self.response)
                yield sse

    return ChunkStream


def translate_error(exc: BaseException, config: ModelConfig) -> ModelError:
    """Map SDK/transport failures to the four model error codes, scrubbing the key from any text."""
    openai = _sdk()
    host = _host(config.base_url)
    if isinstance(exc, openai.APITimeoutError | httpx2.TimeoutException):
        return ModelError(ApiCode.MODEL_TIMEOUT, f"model at {host} did not answer within {config.timeout_s:g}s")
    if isinstance(exc, openai.APIConnectionError | httpx2.TransportError):
        return ModelError(ApiCode.MODEL_UNREACHABLE, f"cannot reach the model at {host}")
    if isinstance(exc, openai.AuthenticationError | openai.PermissionDeniedError):
        detail = _scrub(_status_message(exc), config.api_key)
        return ModelError(
            ApiCode.MODEL_AUTH,
            f"model at {host} rejected the credentials (HTTP {exc.status_code})"
            + (f": {detail}" if detail else ""),
        )
    if isinstance(exc, openai.APIStatusError):
        detail = _scrub(_status_message(exc), config.api_key)
        return ModelError(
            ApiCode.MODEL_ERROR, f"model at {host} returned HTTP {exc.status_code}" + (f": {detail}" if detail else "")
        )
    return ModelError(ApiCode.MODEL_ERROR, _scrub(f"model call failed: {type(exc).__name__}: {exc}", config.api_key))


def _new_http_client() -> httpx2.Client:
    return httpx2.Client(limits=httpx2.Limits(max_connections=200, max_keepalive_connections=40),
                         follow_redirects=False, verify=ssl_context())


# One pooled HTTP client per process (its TLS context core.outbound's one): reuse keeps connections warm;
# a forked worker makes its own (core.process_state), never sharing its parent's sockets.
_shared = PerProcess(_new_http_client, close=lambda client: client.close())


def shared_http_client() -> httpx2.Client:
    return _shared.get()


class ModelClient:
    """Wraps an `openai.OpenAI` client (no SDK retries: the loop decides) for the length of a run.

    Without `http_client` it uses the process-wide pooled one; a passed client stays the caller's to close.
    """

    def __init__(self, config: ModelConfig, *, http_client: httpx2.Client | None = None) -> None:
        self.config = config
        self._client = _sdk().OpenAI(
            base_url=config.base_url,
            # Servers like Ollama ignore the key, but the SDK insists on one.
            api_key=config.api_key or "not-needed",
            max_retries=0,
            timeout=config.timeout_s,  # applied per request, whichever HTTP client carries it
            http_client=http_client or shared_http_client(),
        )
        # The SDK fills these from the process environment (OPENAI_ORG_ID, OPENAI_PROJECT_ID,
        # OPENAI_ADMIN_KEY, OPENAI_CUSTOM_HEADERS); that belongs to the deployment and must not
        # travel to a tenant's endpoint.
        self._client.organization = None
        self._client.project = None
        self._client.admin_api_key = None
        self._client._custom_headers = {}

    def close(self) -> None:
        # The HTTP client is shared or the caller's: closing the SDK client would close it too.
        pass

    def __enter__(self) -> ModelClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _create_stream(self, kwargs: dict[str, Any]) -> Any:
        """`chat.completions.create(stream=True, **kwargs)` without the SDK's `maybe_transform` of the body.

        That transform walks every value of the request against the params' TypedDict annotations to rename
        aliased keys and encode files, none of which a chat request has (plain JSON: messages, tool schemas,
        model, stream): it took most of a chat turn's CPU in the web worker (about 6,000 recursive calls per
        request, growing with the history and the tools' schemas). The body goes out as given, the same JSON."""
        openai = _sdk()
        body = {k: v for k, v in kwargs.items() if k != "extra_body"}
        options: dict[str, Any] = {"security": {"bearer_auth": True}}
        if kwargs.get("extra_body"):
            options["extra_json"] = kwargs["extra_body"]
        return self._client.post("/chat/completions", body=body, options=cast(Any, options),
                                 cast_to=openai.types.chat.ChatCompletion, stream=True,
                                 stream_cls=_chunk_stream())

    def stream_turn(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Iterator[str | ModelTurn]:
        """Yield text deltas as they arrive, then the assembled ModelTurn. Raises ModelError only."""
        extra = {k: v for k, v in self.config.params.items() if k not in RESERVED_PARAMS | TOOLHUB_PARAMS}
        kwargs: dict[str, Any] = {"model": self.config.model, "stream": True,
                                  "messages": wire_messages(messages, self.config.vision)}
        if tools:
            kwargs["tools"] = tools
        if extra:
            kwargs["extra_body"] = extra
        turn = ModelTurn()
        text: list[str] = []
        calls: dict[int, dict[str, Any]] = {}
        # The model's timeout bounds the whole turn (the guarded client honours it on every read),
        # not each read: a server trickling tokens cannot hold a chat open past it.
        end = time.monotonic() + self.config.timeout_s
        try:
            with deadline_at(end):
                stream = self._create_stream(kwargs)
            with stream:
                chunks = iter(stream)
                while True:
                    with deadline_at(end):
                        chunk = next(chunks, None)
                    if chunk is None:
                        break
                    if time.monotonic() > end:
                        raise httpx2.ReadTimeout("the model did not finish in time")
                    # A chunk is its JSON (`_chunk_stream`): a missing key reads None, as on the SDK's models
                    # (built without validation); a value of the wrong kind fails here, as it did there (a choice
                    # that is a string or a list was skipped there: its `.index` is a method, not 0).
                    for choice in chunk.get("choices") or []:
                        index = choice.get("index") if isinstance(choice, dict) else choice.index
                        if index not in (0, None):
                            continue
                        delta = choice.get("delta")
                        if delta is not None and delta.get("content"):
                            text.append(delta["content"])
                            yield delta["content"]
                        _gather_tool_calls(calls, delta.get("tool_calls") if delta is not None else None)
                        if choice.get("finish_reason"):
                            turn.finish_reason = choice["finish_reason"]
        except ModelError:
            raise
        except Exception as exc:  # noqa: BLE001 - every failure leaves here typed
            raise translate_error(exc, self.config) from None
        turn.content = "".join(text)
        turn.tool_calls = [
            ToolCallRequest(
                id=slot["id"] or f"call_{uuid.uuid4().hex[:24]}",
                name=slot["name"],
                arguments="".join(slot["arguments"]),
            )
            for _, slot in sorted(calls.items())
        ]
        yield turn


def _gather_tool_calls(calls: dict[int, dict[str, Any]], deltas: Any) -> None:
    """Fold one chunk's tool-call deltas into `calls` (by index: id, name, argument fragments)."""
    for tc in deltas or []:
        slot = calls.setdefault(tc.get("index"), {"id": None, "name": "", "arguments": []})
        if tc.get("id"):
            slot["id"] = tc["id"]
        function = tc.get("function")
        if function is not None:
            # Most servers send the name once; some repeat it whole in every delta.
            name = function.get("name")
            if name and name != slot["name"]:
                slot["name"] += name
            if function.get("arguments"):
                slot["arguments"].append(function["arguments"])


def sampling_messages(params: dict[str, Any], vision: bool) -> list[dict[str, Any]]:
    """An MCP sampling/createMessage request's messages in OpenAI form (system prompt first).

    Text stays text; an image is an image part for a vision model, a placeholder otherwise; other content
    (audio, tool use) is described, never dropped silently.
    """
    out: list[dict[str, Any]] = []
    if params.get("systemPrompt"):
        out.append({"role": "system", "content": str(params["systemPrompt"])})
    for message in params.get("messages") or []:
        role = "assistant" if message.get("role") == "assistant" else "user"
        blocks = message.get("content")
        blocks = blocks if isinstance(blocks, list) else [blocks]
        parts: list[dict[str, Any]] = []
        for block in blocks:
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "text":
                parts.append({"type": "text", "text": str(block.get("text") or "")})
            elif kind == "image" and vision and role == "user":
                parts.append({"type": "image_url",
                              "image_url": {"url": f"data:{block.get('mimeType')};base64,{block.get('data')}"}})
            else:
                parts.append({"type": "text", "text": f"[{kind or 'content'}: {block.get('mimeType') or 'not shown'}]"})
        if all(p["type"] == "text" for p in parts):
            out.append({"role": role, "content": "\n".join(p["text"] for p in parts)})
        else:
            out.append({"role": role, "content": parts})
    return out


def sample(config: ModelConfig, params: dict[str, Any], *, http_client: httpx2.Client | None = None) -> dict[str, Any]:
    """Answer an MCP sampling/createMessage request with `config`'s model; the CreateMessageResult as JSON.

    The request's `maxTokens`, `temperature` and `stopSequences` apply on top of the model's own params;
    its model preferences are advisory and the agent's model is used. Raises ModelError only.
    """
    extra = dict(config.params)
    if isinstance(params.get("maxTokens"), int):
        extra["max_tokens"] = params["maxTokens"]
    if isinstance(params.get("temperature"), int | float):
        extra["temperature"] = params["temperature"]
    if params.get("stopSequences"):
        extra["stop"] = list(params["stopSequences"])
    tuned = ModelConfig(base_url=config.base_url, model=config.model, api_key=config.api_key, params=extra,
                        timeout_s=config.timeout_s)
    turn: ModelTurn | None = None
    with ModelClient(tuned, http_client=http_client) as client:
        for item in client.stream_turn(sampling_messages(params, config.vision), []):
            if isinstance(item, ModelTurn):
                turn = item
    assert turn is not None
    stop = {"stop": "endTurn", "length": "maxTokens"}.get(turn.finish_reason or "", "endTurn")
    return {"role": "assistant", "content": {"type": "text", "text": turn.content}, "model": config.model,
            "stopReason": stop}
