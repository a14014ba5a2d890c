"""An upstream server's question mid-call, relayed to a 2026-07-28 gateway client as an input request.

On the 2026-07-28 wire the gateway cannot send its client a request: a question has to ride a result
(`input_required`) and its answer the client's retry. The upstream call, though, is in flight in a worker
thread, waiting for the answer (tools_app.runtime.mcp.client_requests). So the call keeps running in this
process: the first round answers the question as an input request whose sealed requestState names the call,
the retry hands the answer to the waiting call and answers whatever comes next (another question, or the
result). The retry must reach this process (it holds the call): another process answers a typed refusal,
and a call nobody answers within TOOLHUB_MCP_ELICIT_TIMEOUT_S is declined to the server, as in the 2025 era.
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

from core.codes import ApiCode
from tools_app.runtime.mcp.client_requests import ClientRequestRefused

QUESTION_KEY = "upstream-elicitation"
_ME = secrets.token_hex(8)  # this process: a requestState naming another one's call is refused at once


def _here() -> str:
    """This gateway: the process and its event loop (one gateway serves on one loop)."""
    return f"{_ME}:{id(asyncio.get_running_loop())}"


class RelayRefused(Exception):
    """The retry names a call this process does not hold (another process asked, or it ended)."""

    code = ApiCode.INVALID_REQUEST_STATE


class Relay:
    """One call's questions: asked from its worker thread, answered by the client's retries."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.id = secrets.token_urlsafe(16)
        self.questions: asyncio.Queue[tuple[dict[str, Any], Future[dict[str, Any]]]] = asyncio.Queue()
        self.waiting: Future[dict[str, Any]] | None = None
        self.task: asyncio.Future[Any] | None = None
        self.owner: str = ""
        self.expires = 0.0

    def ask(self, params: dict[str, Any]) -> dict[str, Any]:
        """Worker thread: post the server's elicitation and wait for the client's answer (ElicitResult wire)."""
        answer: Future[dict[str, Any]] = Future()
        self.loop.call_soon_threadsafe(self.questions.put_nowait, (params, answer))
        timeout = float(settings.TOOLHUB_MCP_ELICIT_TIMEOUT_S)
        try:
            return answer.result(timeout)
        except TimeoutError:
            raise ClientRequestRefused("declined: the gateway's client did not answer in time") from None

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
        params, self.waiting = asking.result()
        self.expires = time.monotonic() + float(settings.TOOLHUB_MCP_ELICIT_TIMEOUT_S)
        _held[self.id] = self
        shape = types.ElicitRequestURLParams if params.get("mode") == "url" else types.ElicitRequestFormParams
        question = types.ElicitRequest(params=shape.model_validate(params))
        return types.InputRequiredResult(input_requests={QUESTION_KEY: question},
                                         request_state=json.dumps({"relay": self.id, "at": _here()}))

    def answer(self, result: types.ElicitResult | None) -> None:
        waiting, self.waiting = self.waiting, None
        if waiting is not None and not waiting.done():
            decline = types.ElicitResult(action="decline")
            waiting.set_result((result or decline).model_dump(by_alias=True, mode="json", exclude_none=True))


_held: dict[str, Relay] = {}


def _forget(relay_id: str) -> None:
    _held.pop(relay_id, None)


def relay_of(params: types.CallToolRequestParams) -> str | None:
    """The relayed call a retry's (verified) requestState names, if any."""
    try:
        state = json.loads(params.request_state or "")
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
        raise RelayRefused(f"the server's question was asked by {where}; call the tool again")
    answer = (params.input_responses or {}).get(QUESTION_KEY)
    relay.answer(answer if isinstance(answer, types.ElicitResult) else None)
    return relay
