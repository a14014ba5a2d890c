"""What a 2026-07-28 request's routing headers let the gateway answer before its body is read.

A 2026-07-28 client names the method and the tool of every POST in headers (`Mcp-Method`, `Mcp-Name`), and the
SDK refuses a request whose headers disagree with its body (HEADER_MISMATCH). So a refusal that depends only on
who calls and what they call can be answered from the headers and the principal alone, before the body is
parsed: a viewer's tools/call, prompts/get or resources/read (viewers list, they do not use), and those of a
member whose invoke throttle (which all three draw on) this process saw spent, until it refills. Trusting the header for a refusal is safe whatever the body says: a header that
lies only refuses its own sender, and a body the headers do not match would have been refused anyway.
Nothing here leaves the event loop: the role is in the principal, the throttle's state in this process's memory
(noted when the throttle refused a call here; another process learns on its own first refusal).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from core.codes import ApiCode, Reason, ResultCode

# The methods the role check and the invoke throttle gate, and how a viewer's refusal says so.
GATED = {
    "tools/call": "viewers may list this agent's tools but not call them",
    "prompts/get": "viewers may list this agent's prompts and resources but not use them",
    "resources/read": "viewers may list this agent's prompts and resources but not use them",
}
REFUSED = -32003  # as server.Refused: JSON-RPC's implementation-defined server error range
_SPENT_MAX = 4096


@dataclass(frozen=True)
class EarlyRefusal:
    status: int
    message: str
    data: dict[str, Any]
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)

    def body(self) -> dict[str, Any]:
        """A JSON-RPC error without an id (the body, hence the id, was never read); the SDK's client gives it the
        id of the request it sent."""
        return {"jsonrpc": "2.0", "id": None, "error": {"code": REFUSED, "message": self.message, "data": self.data}}


_spent: dict[int, float] = {}  # user id -> monotonic time their invoke throttle refills (as this process saw)


def note_spent(user_id: int, retry_after_s: float) -> None:
    """The invoke throttle refused this user a call (any thread): refuse their next calls from the headers
    until it refills."""
    if len(_spent) >= _SPENT_MAX:
        now = time.monotonic()
        for stale in [u for u, until in _spent.items() if until <= now] or [next(iter(_spent))]:
            _spent.pop(stale, None)
    _spent[int(user_id)] = time.monotonic() + max(0.0, float(retry_after_s))


def early_refusal(principal: Any, method: str | None, name: str | None) -> EarlyRefusal | None:
    """The refusal a request's routing headers already decide, else None (the body is then read as usual)."""
    if method not in GATED:
        return None
    if not principal.may_call:
        return EarlyRefusal(403, f"{GATED[method]} (you are {principal.role.value})",
                            {"code": ApiCode.PERMISSION_DENIED, "error_code": ResultCode.DISABLED,
                             "error_reason": Reason.VIEWER_MAY_NOT_CALL, **({"name": name} if name else {})})
    until = _spent.get(int(principal.user.pk))
    if until is not None:
        wait = until - time.monotonic()
        if wait > 0:
            seconds = max(1, int(wait + 0.999))
            return EarlyRefusal(429, f"too many calls: the invoke rate of this token is spent; retry in {seconds} s",
                                {"code": ApiCode.THROTTLED, "retry_after_s": seconds},
                                [(b"retry-after", str(seconds).encode())])
        _spent.pop(int(principal.user.pk), None)
    return None
