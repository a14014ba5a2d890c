"""Tool search: the functions of a large toolset that best match a question (Django-free).

Four signals, each cheap at query time once the index is built:
- semantic: the question's USE vector (the second part of the intent embedder's question vector) against each
  function's name, title and description embedded with the same model;
- lexical: BM25 over the same text (the intent router's stemmed features), for names and exact words;
- intents: the intent router's matches for the question (its labelled examples), crediting their functions;
- usage: a small prior for the functions this agent calls most.
The question is embedded once, by the second model alone, and that one vector serves the functions and the router.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from agents_app.runtime.intents.lexical import Bm25, features

# Weights, chosen on the dev split of the labelled intent questions (bench/tool_search.py --tune); the held-out
# split is only reported.
SEMANTIC_W = 1.0
LEXICAL_W = 0.25
INTENT_W = 1.6
USAGE_W = 0.05
ROUTED = 3  # intent matches credited per question
MAX_QUERY_CHARS = 300  # as the intent embedder: what a question is about is said up front


@dataclass(frozen=True)
class FunctionDoc:
    name: str  # the qualified name a client calls
    title: str
    description: str

    def text(self) -> str:
        """What is matched: the name's words, the title and the description."""
        words = re.sub(r"[_\-]+", " ", self.name)
        return f"{words}. {self.title}. {self.description}"[:600]


@dataclass(frozen=True)
class Hit:
    name: str
    title: str
    description: str
    score: float


class FunctionIndex:
    """The searchable functions of one toolset. `vectors`: one normalised row per doc (the second model's)."""

    def __init__(self, docs: Sequence[FunctionDoc], vectors: np.ndarray | None) -> None:
        self.docs = list(docs)
        self.position = {d.name: i for i, d in enumerate(self.docs)}
        self.vectors = vectors if vectors is not None and len(vectors) == len(self.docs) else None
        self.bm25 = Bm25([features(d.text()) for d in self.docs])

    def __len__(self) -> int:
        return len(self.docs)

    def search(self, query: str, *, qvec: np.ndarray | None = None, intents: Mapping[str, float] | None = None,
               usage: Mapping[str, int] | None = None, top_k: int = 5) -> list[Hit]:
        """The `top_k` best functions for `query`. `qvec`: its vector in the docs' space; `intents`: function
        name -> the intent router's score for it; `usage`: function name -> calls by this agent."""
        if not self.docs:
            return []
        score = np.zeros(len(self.docs), dtype=np.float32)
        if qvec is not None and self.vectors is not None:
            score += SEMANTIC_W * (self.vectors @ qvec.astype(np.float32))
        score += LEXICAL_W * self.bm25.scores(features(query))  # already 0..1
        for name, value in (intents or {}).items():
            i = self.position.get(name)
            if i is not None:
                score[i] += INTENT_W * float(value)
        if usage:
            most = max(usage.values())
            for name, count in usage.items():
                i = self.position.get(name)
                if i is not None and most > 0:
                    score[i] += USAGE_W * math.log1p(count) / math.log1p(most)
        k = min(top_k, len(self.docs))
        best = np.argpartition(-score, k - 1)[:k]
        best = best[np.argsort(-score[best], kind="stable")]
        return [Hit(self.docs[i].name, self.docs[i].title, self.docs[i].description, round(float(score[i]), 4))
                for i in best]


def build_index(docs: Sequence[FunctionDoc], encode: Callable[[list[str]], np.ndarray] | None,
                cache: dict[str, np.ndarray] | None = None) -> FunctionIndex:
    """An index of `docs`, embedding with `encode` only the texts `cache` (text -> vector) does not hold yet."""
    if encode is None:
        return FunctionIndex(docs, None)
    cache = cache if cache is not None else {}
    texts = [d.text() for d in docs]
    missing = [t for t in dict.fromkeys(texts) if t not in cache]
    if missing:
        for text, vector in zip(missing, encode(missing), strict=True):
            cache[text] = vector
    rows = np.stack([cache[t] for t in texts]) if texts else np.zeros((0, 1), dtype=np.float32)
    return FunctionIndex(docs, rows)


class Embeds(Protocol):
    second_dim: int

    def embed_second(self, texts: Sequence[str]) -> np.ndarray: ...


class Routes(Protocol):
    def route_second(self, question: str, svec: np.ndarray, *, top_k: int = 3) -> Sequence[Any]: ...


def search(index: FunctionIndex, query: str, *, embedder: Embeds | None, router: Routes | None = None,
           refs: Mapping[str, str] | None = None, usage: Mapping[str, int] | None = None,
           top_k: int = 5) -> list[Hit]:
    """One search: the question embedded once, by the second model alone (~5 ms; the main model's ~40 ms would be
    nearly all of a search), matched against the functions' vectors and routed by the intent router on that same
    vector (`route_second`); the router's matches are credited to their functions (`refs`: an intent's function
    ref -> the name in `index`)."""
    qvec = None
    if embedder is not None and (index.vectors is not None or router is not None):
        qvec = embedder.embed_second([query[:MAX_QUERY_CHARS]])[0]
    intents: dict[str, float] = {}
    if router is not None and qvec is not None:
        for match in router.route_second(query, qvec, top_k=ROUTED):
            for ref in match.functions:
                name = (refs or {}).get(ref, ref)
                intents[name] = max(intents.get(name, 0.0), float(match.score))
    return index.search(query, qvec=qvec, intents=intents, usage=usage, top_k=top_k)
