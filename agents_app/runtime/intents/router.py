"""The in-memory intent index: per-node best-example similarity, semantic and lexical, fused into one score.

Built once per tenant tree version (the caller caches it); a query costs one sentence embedding plus a
matrix-vector product and a walk over the query's posting lists, so 1,000 nodes route in milliseconds.
"""

from __future__ import annotations

import math
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agents_app.runtime.intents.embedder import Embedder
from agents_app.runtime.intents.lexical import features

KINDS = ("KB", "KB_AND_MCP", "MCP", "SYSTEM")


@dataclass(frozen=True)
class RouterConfig:
    """How the two channels are mapped to 0..1 and fused.

    e5 cosines of unrelated sentences sit around 0.7-0.8, so the semantic channel is rescaled from
    [semantic_floor, semantic_ceiling] to [0, 1] before it is weighted.
    """

    semantic_weight: float = 0.8
    centroid_weight: float = 0.7  # semantic = this * cos(centroid) + rest * best example cosine
    semantic_floor: float = 0.76
    semantic_ceiling: float = 0.95
    # Examples whose stored vector is missing are embedded while the index is built, up to this many;
    # past it they count on the lexical channel alone until the embedding task has stored them.
    max_embed_on_build: int = 64


@dataclass(frozen=True)
class IntentSpec:
    """One routable node as the router sees it: plain values, no ORM."""

    code: str
    name: str
    kind: str
    path: tuple[str, ...]
    functions: tuple[str, ...] = ()
    description: str = ""
    examples: tuple[str, ...] = ()
    # One row per example (same order) or None where no stored vector exists yet.
    vectors: Sequence[np.ndarray | None] = field(default=(), compare=False, repr=False)


@dataclass(frozen=True)
class Match:
    code: str
    score: float
    path: tuple[str, ...]
    kind: str
    functions: tuple[str, ...]
    semantic: float
    lexical: float
    example: str

    def why(self) -> dict[str, Any]:
        return {"semantic": round(self.semantic, 3), "lexical": round(self.lexical, 3), "closest_example": self.example}


class IntentIndex:
    """Routes a question to the best-matching nodes among those it was built from."""

    def __init__(self, specs: Sequence[IntentSpec], embedder: Embedder, config: RouterConfig | None = None) -> None:
        self.config = config or RouterConfig()
        self.embedder = embedder
        self.specs = list(specs)
        self.position = {s.code: i for i, s in enumerate(self.specs)}
        texts: list[str] = []
        row_node: list[int] = []
        vectors: list[np.ndarray | None] = []
        for i, spec in enumerate(self.specs):
            given = list(spec.vectors) + [None] * max(0, len(spec.examples) - len(spec.vectors))
            # The node's own name and description count as one more example (lexical channel only).
            profile = f"{spec.name} {spec.description}".strip()
            for text, vec in [*zip(spec.examples, given, strict=False), (profile, _SKIP)]:
                texts.append(text)
                row_node.append(i)
                vectors.append(vec)
        self.texts = texts
        self.row_node = np.asarray(row_node, dtype=np.int64)
        self.row_start = np.searchsorted(self.row_node, np.arange(len(self.specs)))
        self.embedded_on_build = self._fill_vectors(texts, vectors)
        dim = embedder.dim
        self.matrix = np.stack([v if isinstance(v, np.ndarray) and v.shape == (dim,) else self._zero()
                                for v in vectors]) if vectors else np.zeros((0, dim), dtype=np.float32)
        # Each node's centroid: the mean of its example vectors is steadier than any one example.
        n = len(self.specs)
        sums = np.zeros((n, dim), dtype=np.float32)
        np.add.at(sums, self.row_node, self.matrix)
        norms = np.linalg.norm(sums, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        self.centroids = sums / norms
        self._build_lexical(texts)

    def _zero(self) -> np.ndarray:
        return np.zeros(self.embedder.dim, dtype=np.float32)

    def _fill_vectors(self, texts: list[str], vectors: list[Any]) -> int:
        missing = [i for i, v in enumerate(vectors) if v is None]
        if not missing or len(missing) > self.config.max_embed_on_build:
            return 0
        fresh = self.embedder.embed([texts[i] for i in missing])
        for i, row in zip(missing, fresh, strict=True):
            vectors[i] = row
        return len(missing)

    def _build_lexical(self, texts: list[str]) -> None:
        bags = [features(t) for t in texts]
        df: dict[str, int] = {}
        for bag in bags:
            for term in bag:
                df[term] = df.get(term, 0) + 1
        n = len(bags)
        self.idf = {t: math.log((n + 1) / (c + 1)) + 1.0 for t, c in df.items()}
        postings: dict[str, tuple[list[int], list[float]]] = {}
        for row, bag in enumerate(bags):
            weights = {t: (1.0 + math.log(c)) * self.idf[t] for t, c in bag.items()}
            norm = math.sqrt(sum(w * w for w in weights.values())) or 1.0
            for t, w in weights.items():
                rows, ws = postings.setdefault(t, ([], []))
                rows.append(row)
                ws.append(w / norm)
        self.postings = {t: (np.asarray(r, dtype=np.int64), np.asarray(w, dtype=np.float32))
                         for t, (r, w) in postings.items()}

    def __len__(self) -> int:
        return len(self.specs)

    # --- querying ---------------------------------------------------------------------------------

    def lexical_scores(self, question: str) -> np.ndarray:
        bag = features(question)
        weights = {t: (1.0 + math.log(c)) * self.idf[t] for t, c in bag.items() if t in self.idf}
        scores = np.zeros(len(self.texts), dtype=np.float32)
        if not weights:
            return scores
        # Unknown terms still count in the query's norm: a question mostly about something else scores lower.
        unknown = sum(((1.0 + math.log(c)) * math.log(len(self.texts) + 1) + 1.0) ** 2
                      for t, c in bag.items() if t not in self.idf)
        norm = math.sqrt(sum(w * w for w in weights.values()) + unknown) or 1.0
        # One pass over the query's posting lists: concatenate them and sum per row.
        rows = np.concatenate([self.postings[t][0] for t in weights])
        ws = np.concatenate([self.postings[t][1] * np.float32(w / norm) for t, w in weights.items()])
        return np.bincount(rows, weights=ws, minlength=len(self.texts)).astype(np.float32)

    def route(self, question: str, *, top_k: int = 3, eligible: Collection[str] | None = None) -> list[Match]:
        """The best `top_k` nodes for the question (restricted to `eligible` codes when given), best first."""
        if not self.specs or not question.strip():
            return []
        cfg = self.config
        qvec = self.embedder.embed([question])[0]
        sem_rows = self.matrix @ qvec
        lex_rows = self.lexical_scores(question)
        n = len(self.specs)
        # Rows are laid out node by node (every node has at least its profile row): per-node maxima are
        # one reduceat over the row starts.
        best = np.maximum.reduceat(sem_rows, self.row_start)
        sem = cfg.centroid_weight * (self.centroids @ qvec) + (1.0 - cfg.centroid_weight) * best
        lex = np.maximum.reduceat(lex_rows, self.row_start)
        sem_scaled = np.clip((sem - cfg.semantic_floor) / (cfg.semantic_ceiling - cfg.semantic_floor), 0.0, 1.0)
        fused = cfg.semantic_weight * sem_scaled + (1.0 - cfg.semantic_weight) * np.clip(lex, 0.0, 1.0)
        if eligible is not None:
            mask = np.zeros(n, dtype=bool)
            idx = [self.position[c] for c in eligible if c in self.position]
            mask[idx] = True
            fused = np.where(mask, fused, -1.0)
        k = max(1, min(top_k, n))
        top = np.argpartition(-fused, k - 1)[:k] if k < n else np.arange(n)
        top = top[np.argsort(-fused[top], kind="stable")]
        out: list[Match] = []
        for i in top:
            if fused[i] < 0:
                continue
            spec = self.specs[int(i)]
            lo = int(self.row_start[i])
            hi = int(self.row_start[i + 1]) if i + 1 < n else len(self.texts)
            closest = lo + int(np.argmax(sem_rows[lo:hi] + lex_rows[lo:hi]))
            out.append(Match(code=spec.code, score=float(round(float(fused[i]), 4)), path=spec.path, kind=spec.kind,
                             functions=spec.functions, semantic=float(sem[i]), lexical=float(lex[i]),
                             example=self.texts[closest]))
        return out


_SKIP = np.zeros(0, dtype=np.float32)  # marker: the profile row has no semantic vector


def timed_route(index: IntentIndex, question: str, **kw: Any) -> tuple[list[Match], int]:
    """route() and its cost in whole milliseconds (as the API reports it)."""
    start = time.perf_counter()
    matches = index.route(question, **kw)
    return matches, int(round((time.perf_counter() - start) * 1000))
