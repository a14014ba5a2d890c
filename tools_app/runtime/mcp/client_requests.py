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


@dataclass(frozen=True, eq=False)
class ClientRequests:
    """The handlers for one call (identity matters: calls sharing a session are told apart by it)."""

    sample: Handler | None = None
    elicit: Handler | None = None
    no_sample: str = NO_SAMPLING
    no_elicit: str = NO_ELICITATION


NOBODY = ClientRequests()
