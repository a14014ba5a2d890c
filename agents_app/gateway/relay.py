"""An upstream server's question mid-call (an elicitation, or a sampling request where the tool's `sampling` setting
allows it and the client declared sampling), relayed to a 2026-07-28 gateway client as an input request.

On the 2026-07-28 wire the gateway cannot send its client a request: a question has to ride a result
(`input_required`) and its answer the client's retry. How the retry finds the upstream call depends on the
upstream's era:

- A 2026-07-28 upstream is stateless too: its question is an `input_required` result of its own. The gateway's
  call (or prompt get, or resource read) ends there (tools_app.runtime.mcp.client_requests.Resume), and the upstream's requestState, what Toolhub
  answered itself (roots), the round count and the tool revision ride INSIDE the gateway's sealed requestState
  (`hand_back`). The client's retry, on whichever web process it lands, re-issues the upstream request with its answers
  and the upstream's requestState (`stateless_of`): nothing is held in memory between the rounds.
- A 2025 upstream asks by a request on its session, and the call is in flight in a worker thread waiting for the
  answer. So the call keeps running in this process: the question rides an input request whose sealed
  requestState names the held call (`Relay`), and the retry hands the answer to it. That retry must reach this
  process: another one answers a typed refusal (`invalid_request_state`, reason `upstream_session_bound`), and a
  call nobody answers within TOOLHUB_MCP_ELICIT_TIMEOUT_S is declined to the server, as in the 2025 era.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from collections.abc import Awaitable
from concurrent.futures import Future
from typing import Any

import mcp_types as types
from django.conf import settings
from django.core.cache import cache
from pydantic import TypeAdapter

from core.codes import ApiCode
from tools_app.runtime.mcp.client_requests import ClientRequestRefused, Resume

QUESTION_KEY = "upstream-elicitation"
SAMPLING_KEY = "upstream-sampling"  # a 2025 upstream's sampling request, relayed the same way
ELICIT, SAMPLE = "elicit", "sample"
SAMPLED = (types.CreateMessageResult, types.CreateMessageResultWithTools)  # a sampling request's answers
_ME = secrets.token_hex(8)  # this process: a requestState naming another one's call is refused at once


def _here() -> str:
    """This gateway: the process and its event loop (one gateway serves on one loop)."""
    return f"{_ME}:{id(asyncio.get_running_loop())}"


class RelayRefused(Exception):
    """The retry names a call this process does not hold (another process asked, or it ended)."""

    code = ApiCode.INVALID_REQUEST_STATE
    reason = "upstream_session_bound"


class Relay:
    """One call's questions: asked from its worker thread, answered by the client's retries."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.id = secrets.token_urlsafe(16)
        self.questions: asyncio.Queue[tuple[str, dict[str, Any], Future[dict[str, Any]]]] = asyncio.Queue()
        self.waiting: Future[dict[str, Any]] | None = None
        self.kind = ELICIT  # what the question waiting for its answer is
        self.task: asyncio.Future[Any] | None = None
        self.owner: str = ""
        self.expires = 0.0

    def ask(self, params: dict[str, Any], kind: str = ELICIT) -> dict[str, Any]:
        """Worker thread: post the server's elicitation (or sampling request) and wait for the client's answer
        (ElicitResult or CreateMessageResult wire; ClientRequestRefused when there is none)."""
        answer: Future[dict[str, Any]] = Future()
        self.loop.call_soon_threadsafe(self.questions.put_nowait, (kind, params, answer))
        timeout = float(settings.TOOLHUB_MCP_ELICIT_TIMEOUT_S)
        try:
            return answer.result(timeout)
        except TimeoutError:
            raise ClientRequestRefused("declined: the gateway's client did not answer in time") from None

    def sample(self, params: dict[str, Any]) -> dict[str, Any]:
        """Worker thread: the server's sampling request, put to the client as an input request."""
        return self.ask(params, SAMPLE)

    def start(self, call: Awaitable[Any]) -> None:
        self.task = asyncio.ensure_future(call)

    async def next(self) -> Any | types.InputRequiredResult:
        """The call's result, or its next question as an input request (the call then waits for the retry)."""
        assert self.task is not None
        asking = asyncio.ensure_future(self.questions.get())
        done, _ = await asyncio.wait({self.task, asking}, return_when=asyncio.FIRST_COMPLETED)
        if self.task in done:
            asking.cancel()
            _forget(self.id)
            return self.task.result()
        self.kind, params, self.waiting = asking.result()
        self.expires = time.monotonic() + float(settings.TOOLHUB_MCP_ELICIT_TIMEOUT_S)
        _held[self.id] = self
        question: types.InputRequest
        if self.kind == SAMPLE:
            question = types.CreateMessageRequest(params=types.CreateMessageRequestParams.model_validate(params))
        else:
            shape = types.ElicitRequestURLParams if params.get("mode") == "url" else types.ElicitRequestFormParams
            question = types.ElicitRequest(params=shape.model_validate(params))
        return types.InputRequiredResult(input_requests={self.key: question},
                                         request_state=json.dumps({"relay": self.id, "at": _here()}))

    @property
    def key(self) -> str:
        """The waiting question's key in inputRequests (and its answer's in the retry's inputResponses)."""
        return SAMPLING_KEY if self.kind == SAMPLE else QUESTION_KEY

    def answer(self, result: Any) -> None:
        """The client's answer to the waiting question: no elicitation answer is a decline, no sampling answer (none
        of the right shape) refuses the server's request."""
        waiting, self.waiting = self.waiting, None
        if waiting is None or waiting.done():
            return
        if self.kind == SAMPLE:
            if isinstance(result, SAMPLED):
                waiting.set_result(result.model_dump(by_alias=True, mode="json", exclude_none=True))
            else:
                waiting.set_exception(ClientRequestRefused("declined: the gateway's client did not answer the "
                                                           "server's sampling request"))
            return
        chosen = result if isinstance(result, types.ElicitResult) else types.ElicitResult(action="decline")
        waiting.set_result(chosen.model_dump(by_alias=True, mode="json", exclude_none=True))


_held: dict[str, Relay] = {}


def _forget(relay_id: str) -> None:
    _held.pop(relay_id, None)


def relay_of(params: types.CallToolRequestParams) -> str | None:
    """The relayed call a retry's (verified) requestState names, if any."""
    if not params.request_state:  # a first call (nearly every one): nothing to parse
        return None
    try:
        state = json.loads(params.request_state)
    except ValueError:
        return None
    return state.get("relay") if isinstance(state, dict) and isinstance(state.get("relay"), str) else None


def resume(params: types.CallToolRequestParams, owner: str) -> Relay:
    """The held call a retry names, given the client's answer; RelayRefused when this process has none."""
    now = time.monotonic()
    for stale in [k for k, r in _held.items() if r.expires < now]:
        _held.pop(stale).answer(None)
    state = json.loads(params.request_state or "{}")
    here = state.get("at") == _here()
    relay = _held.pop(str(state.get("relay")), None) if here else None
    if relay is None or relay.owner != owner:
        where = "this call, which has ended" if here else "another Toolhub process"
        raise RelayRefused(f"the upstream server speaks MCP 2025 (its question is a request on its session, held by "
                           f"the process that asked), and it was asked by {where}; call the tool again")
    relay.answer((params.input_responses or {}).get(relay.key))
    return relay


# --- a 2026-07-28 upstream: stateless rounds, its state sealed inside the gateway's ---------------------------

UPSTREAM = "upstream"  # the gateway's requestState of a round handed back: {"upstream": {...}}
_INPUT_REQUEST: TypeAdapter[types.InputRequest] = TypeAdapter(types.InputRequest)


def hand_back(asked: dict[str, Any], call_id: int | None = None) -> types.InputRequiredResult:
    """The upstream's questions (ToolResult.meta[INPUT_REQUIRED]) as this gateway's own input request, under the
    upstream's keys. The requestState carries what re-issuing the upstream call needs besides the client's answers
    (the call itself, its tool, function and arguments, is bound by the seal: modern.state_boundary); the
    boundary seals it on the way out, so the client can neither read the upstream's state nor alter any of it.
    `call_id` is the call's audit row (awaiting input): the round that answers settles it (`continued_call`)."""
    requests = {str(key): _INPUT_REQUEST.validate_python(raw) for key, raw in dict(asked["requests"]).items()}
    state = {UPSTREAM: {"state": asked.get("state"), "answered": dict(asked.get("answered") or {}),
                        "asked": {key: request.method for key, request in sorted(requests.items())},
                        "rounds": int(asked["rounds"]), "revision": [int(v) for v in asked["revision"]],
                        **({"call": int(call_id)} if call_id is not None else {})}}
    return types.InputRequiredResult(input_requests=requests, request_state=json.dumps(state))


def _answer_to(method: str, answer: Any) -> dict[str, Any] | None:
    """The client's answer to one handed-back question, as the upstream gets it. An elicitation's missing (or
    wrongly shaped) answer is a decline; a sampling request's is left out, so the upstream asks again (a round
    more, under the cap): there is no "declined" completion to send."""
    if method == "sampling/createMessage":
        return answer.model_dump(by_alias=True, mode="json", exclude_none=True) if isinstance(answer, SAMPLED) else None
    chosen = answer if isinstance(answer, types.ElicitResult) else types.ElicitResult(action="decline")
    return chosen.model_dump(by_alias=True, mode="json", exclude_none=True)


def stateless_of(params: Any) -> Resume | None:
    """The upstream round a retry's (verified, opened) requestState resumes, with the client's answers to it
    (`_answer_to`). None when the state is no such round."""
    if not params.request_state:
        return None
    try:
        state = json.loads(params.request_state)
    except ValueError:
        return None
    upstream = state.get(UPSTREAM) if isinstance(state, dict) else None
    if not isinstance(upstream, dict):
        return None
    given = params.input_responses or {}
    responses = dict(upstream.get("answered") or {})
    asked = upstream.get("asked") or {}
    if isinstance(asked, list):  # sealed before sampling was handed back: elicitations only
        asked = {key: "elicitation/create" for key in asked}
    for key, method in asked.items():
        answer = _answer_to(str(method), given.get(key))
        if answer is not None:
            responses[key] = answer
    revision = upstream.get("revision") or []
    return Resume(responses=responses, state=upstream.get("state"), rounds=int(upstream.get("rounds") or 0),
                  revision=(int(revision[0]), int(revision[1])))


def continued_call(params: Any) -> int | None:
    """The audit row of the call a retry continues (tools_app.services.invoke, `continuing`): the call was counted
    and audited when it began, so its later rounds are not counted again and settle its one row. A sealed round is
    good for one such retry: the first claims it (shared cache, every process); a replay of the same requestState is
    a new call, counted and audited on its own. None when the state names no call's round."""
    try:
        state = json.loads(params.request_state or "")
    except ValueError:
        return None
    upstream = state.get(UPSTREAM) if isinstance(state, dict) else None
    if not isinstance(upstream, dict) or not isinstance(upstream.get("call"), int):
        return None
    call = int(upstream["call"])
    claim = f"toolhub:gw-round:{call}:{int(upstream.get('rounds') or 0)}"
    return call if cache.add(claim, 1, timeout=int(settings.TOOLHUB_MCP_REQUEST_STATE_TTL_S) + 60) else None
