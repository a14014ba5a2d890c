"""What a routed chat turn offers the model: the matched nodes' functions, or the whole toolset below a threshold."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:  # the router imports numpy; this module only names its matches (issue 35: import costs)
    from agents_app.runtime.intents.router import Match

Mode = Literal["intent", "fallback", "system"]
OFFERS_FUNCTIONS = ("MCP", "KB_AND_MCP")
OFFERS_KNOWLEDGE = ("KB", "KB_AND_MCP")


@dataclass(frozen=True)
class Routing:
    mode: Mode
    offered: tuple[str, ...]
    chosen: tuple[Match, ...]
    matches: tuple[Match, ...]
    threshold: float
    reason: str
    notes: tuple[str, ...] = field(default=())

    def event(self, *, full_count: int) -> dict[str, Any]:
        """The `intent.routed` chat event: which intents matched, and why this set of functions was offered."""
        chosen = {m.code for m in self.chosen}
        return {
            "mode": self.mode,
            "reason": self.reason,
            "threshold": self.threshold,
            "matches": [{"intent": m.code, "score": m.score, "path": list(m.path), "kind": m.kind,
                         "functions": list(m.functions), "chosen": m.code in chosen, "why": m.why()}
                        for m in self.matches],
            "offered": list(self.offered),
            "offered_count": len(self.offered),
            "full_count": full_count,
            "notes": list(self.notes),
        }


def eligible(kind: str, functions: Sequence[str], available: set[str], knowledge: str | None) -> bool:
    """May a node of this kind be routed to, given the functions this run may offer?"""
    if kind == "SYSTEM":
        return True
    has_fn = kind in OFFERS_FUNCTIONS and any(f in available for f in functions)
    has_kb = kind in OFFERS_KNOWLEDGE and knowledge is not None and knowledge in available
    return has_fn or has_kb


def decide(
    matches: Sequence[Match],
    *,
    available: Sequence[str],
    threshold: float,
    limit: int,
    margin: float = 0.1,
    knowledge: str | None = None,
    always_on: Sequence[str] = (),
) -> Routing:
    """Pick the offered functions (qualified names, in `available` order of preference) for one turn.

    Nodes within `margin` of the best score (and above the threshold) are all taken: two close intents
    both get their functions rather than a coin flip. Below the threshold the whole toolset is offered,
    the best matches' and the always-on functions first, capped at `limit` (the model's tool limit).
    """
    pool = list(dict.fromkeys(available))
    in_pool = set(pool)
    matches = tuple(matches)
    if not matches or matches[0].score < threshold:
        return _fallback(matches, pool, threshold=threshold, limit=limit, always_on=always_on)
    top = matches[0].score
    chosen = tuple(m for m in matches if m.score >= threshold and m.score >= top - margin)
    if chosen[0].kind == "SYSTEM":
        return Routing("system", (), chosen[:1], matches, threshold,
                       f"{chosen[0].code} is a SYSTEM intent ({top:.2f}): answered without tools")
    wanted, notes = _wanted(chosen, knowledge)
    wanted.extend(always_on)
    offered = [f for f in dict.fromkeys(wanted) if f in in_pool]
    names = ", ".join(f"{m.code} ({m.score:.2f})" for m in chosen if m.kind != "SYSTEM")
    return Routing("intent", tuple(offered[:limit]), tuple(m for m in chosen if m.kind != "SYSTEM"), matches,
                   threshold, f"matched {names}", tuple(notes))


def _fallback(matches: tuple[Match, ...], pool: list[str], *, threshold: float, limit: int,
              always_on: Sequence[str]) -> Routing:
    """No intent is sure enough: the whole toolset, the best matches' and the always-on functions first."""
    in_pool = set(pool)
    best = f"best score {matches[0].score:.2f} ({matches[0].code})" if matches else "no intent matched"
    # The best matches' functions, then the always-on ones, so a cap at the model's limit keeps both.
    first = [f for f in [*(f for m in matches for f in m.functions), *always_on] if f in in_pool]
    offered = list(dict.fromkeys([*first, *pool]))
    capped = (f"toolset capped at {limit} of {len(offered)} functions",) if len(offered) > limit else ()
    return Routing("fallback", tuple(offered[:limit]), (), matches, threshold,
                   f"{best} is below the threshold {threshold:.2f}: offering the whole toolset", capped)


def _wanted(chosen: tuple[Match, ...], knowledge: str | None) -> tuple[list[str], list[str]]:
    """The chosen intents' functions (and the knowledge tool for knowledge-base intents), and notes on what is
    missing."""
    wanted: list[str] = []
    notes: list[str] = []
    for m in chosen:
        if m.kind in OFFERS_FUNCTIONS:
            wanted.extend(m.functions)
        if m.kind in OFFERS_KNOWLEDGE:
            if knowledge:
                wanted.append(knowledge)
            else:
                notes.append(f"{m.code} is a knowledge-base intent but the agent names no knowledge tool")
    return wanted, notes
