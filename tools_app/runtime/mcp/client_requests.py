"""What Toolhub's MCP client answers when a server asks *it* something during a call: sampling (a model
completion) and elicitation (a question for a person).

Django-free. The caller of one tools/call passes a `ClientRequests`: the chat passes handlers that hold
the request for the chat's user and answer through the agent's own model; every other caller (direct
invoke, the gateway, Test) passes none, and the request is declined with the reason. Handlers are plain
blocking functions taking and returning the wire's JSON (they run in a worker thread, never on the
pool's event loop); they raise `ClientRequestRefused` to decline.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Handler = Callable[[dict[str, Any]], dict[str, Any]]

NO_SAMPLING = ("declined: Toolhub answers sampling requests only for calls an agent makes in a chat, after "
               "the chat's user approves them; this call was not made by an agent")
NO_ELICITATION = ("declined: Toolhub puts a server's questions to a person only during a streamed chat; "
                  "this call was not made in one (direct invoke, gateway or Test), so nobody can answer")


class ClientRequestRefused(Exception):
    """A handler's refusal; the message goes back to the server as the reason."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


# ToolResult.meta of a call whose 2026-07-28 server asked questions handed back to the caller (`Resume`):
# {"requests": {key: ElicitRequest or CreateMessageRequest wire}, "state": the server's requestState, "answered": {key: answer wire} (what
# Toolhub answered itself, roots), "rounds": rounds taken, "revision": [tool id, config version]}.
INPUT_REQUIRED = "input_required"
# ToolResult.meta of a resumed call refused before it was sent: the tool changed (or no longer speaks 2026-07-28)
# since its server asked, so the server's requestState is not its to read.
INPUT_STATE_STALE = "input_state_stale"


@dataclass(frozen=True)
class Resume:
    """Stateless rounds (MCP 2026-07-28 on both sides, the gateway's 2026 clients): a 2026 server's questions that
    go to the caller are not waited for in place; the call ends with them (ToolResult.meta[INPUT_REQUIRED]) and the
    caller's next call, on any process, resumes it: the answers and the server's requestState as it came.

    A 2025 server's questions are requests on its session and are still answered in place (`elicit`)."""

    responses: dict[str, Any] | None = None  # answers by the server's keys, in wire form
    state: str | None = None  # the server's requestState of the round answered, untouched
    rounds: int = 0  # input_required rounds taken before this call (TOOLHUB_MCP_INPUT_ROUNDS caps their sum)
    revision: tuple[int, int] | None = None  # the tool revision whose server asked (None: a first call)

    @property
    def resumed(self) -> bool:
        return self.revision is not None

    def to_json(self) -> dict[str, Any]:
        return {"responses": self.responses, "state": self.state, "rounds": self.rounds,
                "revision": list(self.revision) if self.revision is not None else None}

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Resume:
        revision = raw.get("revision")
        return cls(responses=raw.get("responses"), state=raw.get("state"), rounds=int(raw.get("rounds") or 0),
                   revision=(int(revision[0]), int(revision[1])) if revision else None)


class InputHandedBack(Exception):
    """A 2026 server's questions for the caller, handed back with its requestState (ClientRequests.stateless);
    `payload` is what ToolResult.meta[INPUT_REQUIRED] holds."""

    def __init__(self, payload: dict[str, Any]) -> None:
        super().__init__("input required")
        self.payload = payload


class InputStateStale(Exception):
    """A resumed request whose tool changed (config version, era) since its server asked: not sent."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True, eq=False)
class ClientRequests:
    """The handlers for one call (identity matters: calls sharing a session are told apart by it)."""

    sample: Handler | None = None
    elicit: Handler | None = None
    no_sample: str = NO_SAMPLING
    no_elicit: str = NO_ELICITATION
    # Set: a 2026 server's questions that `elicit` or `sample` would answer are handed back to the caller instead
    # (Resume); the handlers' presence says the caller can answer them.
    stateless: Resume | None = None


NOBODY = ClientRequests()
