"""The in-memory intent index: whitened centroid similarity of two embedding models with a domain prior (semantic)
and BM25 (lexical), fused.

Built once per tenant tree version (the caller caches it); a query costs one sentence embedding (both models), a
whitening product per embedding part (384x384 for e5, 512x512 for USE), matrix-vector products over the node
centroids and a walk over the query's posting lists, so the index's own work at 1,000 nodes is about half a
millisecond and the embedding is nearly all of a route's cost.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from agents_app.runtime.intents.embedder import Embedder
from agents_app.runtime.intents.lexical import Bm25, features

KINDS = ("KB", "KB_AND_MCP", "MCP", "SYSTEM")


@dataclass(frozen=True)
class RouterConfig:
    """How the two channels are computed, mapped to 0..1 and fused.

    Semantic: the cosine of the question with each node's centroid of example vectors (`query:` texts, and
    `passage:` texts mixed in by `passage_weight`), taken in a whitened space: vectors are centred on the mean
    example and multiplied by (S + a*I)^-1/2, S the covariance of examples around their own node's mean and a
    `whiten_shrinkage` times S's mean eigenvalue (0 turns whitening off, and centring with it). That discounts
    what every example shares (e5's cosines of unrelated sentences sit around 0.75-0.85) and how a node's
    examples differ among themselves (wording, language), and keeps what tells nodes apart. Hierarchy: the
    question's whitened cosine with the centroid of its domain (the nodes under the same root; a node alone in
    its domain gets the mean of the other domains') is added with `domain_weight`, which keeps a question about
    a shop's products out of a big "Facilities" domain that shares its nouns. Whitened cosines say which node
    fits best but not whether any fits (a question about nothing in the tree still has a nearest centroid), so
    the plain cosine with the centroid is mixed back in with `plain_weight`: (whitened + plain_weight * plain)
    / (1 + plain_weight). A second model (the embedder's `second_dim` part: USE multilingual v3, trained on
    question/answer and paraphrase pairs where e5 was trained for retrieval) gives a second opinion: its whitened
    cosine with the node, with the same domain prior and no plain share, enters relative to its cosine with the
    main model's best node, times `second_weight` (0 turns it off): it moves nodes past each other, and the best
    score is never below the main model's best, so the calibration below holds with and without it. The result
    is rescaled from [semantic_floor, semantic_ceiling] to [0, 1]. Lexical: BM25 over each node's examples, name
    and description as one document, scaled to 0..1.

    Every value here was chosen on the dev split (`bench/intents_tune.py`), never on the held-out paraphrases.
    Floor, ceiling and semantic_weight keep the score's calibration at 1,000 nodes where the plain-cosine router
    had it (median right answer 0.64, median question about nothing in the tree 0.41), so the fallback
    threshold (TOOLHUB_INTENT_THRESHOLD, 0.35) keeps its meaning: it falls back on as many off-topic questions
    as before and on no more right ones.
    """

    semantic_weight: float = 0.964
    passage_weight: float = 0.0
    whiten_shrinkage: float = 3.0
    domain_weight: float = 0.5
    plain_weight: float = 3.0
    second_weight: float = 0.177
    semantic_floor: float = 0.563
    semantic_ceiling: float = 0.904
    # route_second's rescaling of the second model's scores (tool search's fast path), chosen on the dev split.
    second_floor: float = 0.0
    second_ceiling: float = 0.5
    bm25_k1: float = 1.2
    bm25_b: float = 0.75
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
    # One row per example (same order): its query and passage vectors (2 * dim), or None where none is stored yet.
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
        # Examples still without a vector (too many to embed here): the caller should have them stored.
        self.missing_vectors = sum(v is None for v in vectors)
        dim, width = embedder.dim, 2 * embedder.dim + embedder.second_dim
        rows = np.stack([v if isinstance(v, np.ndarray) and v.shape == (width,) else self._zero()
                         for v in vectors]) if vectors else np.zeros((0, width), dtype=np.float32)
        self.matrix = np.ascontiguousarray(rows[:, :dim])  # e5 query-side rows: the closest example
        self._build_semantic(rows)
        self._build_lexical(texts)
        docs: list[Counter[str]] = [Counter() for _ in self.specs]
        for row, text in enumerate(texts):
            docs[int(self.row_node[row])].update(features(text))
        self.bm25 = Bm25(docs, k1=self.config.bm25_k1, b=self.config.bm25_b)

    def _build_semantic(self, rows: np.ndarray) -> None:
        """Whitened spaces for each embedding part in use (e5 query, e5 passage, second model), and domains."""
        cfg, dim, n = self.config, self.embedder.dim, len(self.specs)
        present = np.linalg.norm(rows, axis=1) > 0 if len(rows) else np.zeros(0, dtype=bool)
        counts = np.bincount(self.row_node[present], minlength=n).astype(np.float64)
        # Domains: the first code of each path. A node alone in its domain has no domain evidence of its own.
        roots = [s.path[0] if s.path else s.code for s in self.specs]
        names = sorted(set(roots))
        position = {name: i for i, name in enumerate(names)}
        self._group = np.asarray([position[r] for r in roots], dtype=np.int64)
        sizes = np.bincount(self._group[counts > 0], minlength=len(names)) if n else np.zeros(0, np.int64)
        self._shared = np.asarray(sizes[self._group] >= 2, dtype=bool) if n else np.zeros(0, dtype=bool)
        self._multi = sizes >= 2
        build = _Space.build
        query = build(rows[:, :dim], self, present, counts, len(names), cfg.whiten_shrinkage)
        self._main = [(1.0 - cfg.passage_weight, query)] if cfg.passage_weight < 1 else []
        if cfg.passage_weight > 0:
            passage = build(rows[:, dim:2 * dim], self, present, counts, len(names), cfg.whiten_shrinkage)
            # A question is a "query:" vector: it is centred on the query-side mean in both spaces.
            self._main.append((cfg.passage_weight, dataclasses.replace(passage, mu=query.mu)))
        second = self.embedder.second_dim
        self._second = (build(rows[:, 2 * dim:2 * dim + second], self, present, counts, len(names),
                              cfg.whiten_shrinkage) if second and cfg.second_weight > 0 else None)

    def _prior(self, domain: np.ndarray, node: np.ndarray) -> np.ndarray:
        """Node cosines with the domain prior added (`domain_weight`), as described in RouterConfig."""
        lam = self.config.domain_weight
        if not lam or not self._multi.any():
            return node
        prior = np.where(self._shared, domain[self._group], np.float32(domain[self._multi].mean()))
        return (node + np.float32(lam) * prior) / np.float32(1.0 + lam)

    def semantic_scores(self, qvec: np.ndarray) -> np.ndarray:
        """Each node's semantic similarity to a question vector (before rescaling to 0..1)."""
        n, dim = len(self.specs), self.embedder.dim
        node: np.ndarray = np.zeros(n, dtype=np.float32)
        domain = np.zeros(len(self._multi), dtype=np.float32)
        plain = np.zeros(n, dtype=np.float32)
        kappa = self.config.plain_weight
        main = qvec[:dim]
        for weight, space in self._main:
            q = space.question(main)
            node += np.float32(weight) * (space.nodes @ q)
            domain += np.float32(weight) * (space.domains @ q)
            if kappa:
                plain += np.float32(weight) * (space.raw @ main)
        node = self._prior(domain, node)
        if kappa:
            node = (node + np.float32(kappa) * plain) / np.float32(1.0 + kappa)
        if self._second is not None:
            q = self._second.question(qvec[dim:dim + self.embedder.second_dim])
            second = self._prior(self._second.domains @ q, self._second.nodes @ q)
            # Relative to the main model's best node: it re-ranks, and the best score never drops below the main
            # model's, so the level the threshold was calibrated against stays.
            node = node + np.float32(self.config.second_weight) * (second - second[int(np.argmax(node))])
        return node.astype(np.float32)

    def second_scores(self, svec: np.ndarray) -> np.ndarray:
        """Each node's similarity to a question by the second model alone (`svec`: its normalised second-model
        vector): whitened cosine with the domain prior, plain cosine mixed in by `plain_weight`, as for the main
        model. Zeros when the index has no second space."""
        n = len(self.specs)
        if self._second is None or not n:
            return np.zeros(n, dtype=np.float32)
        q = self._second.question(svec)
        node = self._prior(self._second.domains @ q, self._second.nodes @ q)
        kappa = np.float32(self.config.plain_weight)
        mixed: np.ndarray = ((node + kappa * (self._second.raw @ svec)) / (np.float32(1.0) + kappa)).astype(np.float32)
        return mixed

    def route_second(self, question: str, svec: np.ndarray, *, top_k: int = 3) -> list[Match]:
        """The best `top_k` nodes by the second model and BM25 alone, for a caller that has the question's second
        vector and cannot wait for the main model (tool search: ~5 ms a question instead of ~40). Scores are
        rescaled from [second_floor, second_ceiling]; they rank, they are not calibrated against the threshold."""
        if not self.specs or not question.strip():
            return []
        cfg, n = self.config, len(self.specs)
        sem = self.second_scores(svec)
        lex = self.bm25.scores(features(question))
        scaled = np.clip((sem - cfg.second_floor) / (cfg.second_ceiling - cfg.second_floor), 0.0, 1.0)
        fused = cfg.semantic_weight * scaled + (1.0 - cfg.semantic_weight) * np.clip(lex, 0.0, 1.0)
        k = max(1, min(top_k, n))
        top = np.argpartition(-fused, k - 1)[:k] if k < n else np.arange(n)
        top = top[np.argsort(-fused[top], kind="stable")]
        return [Match(code=self.specs[int(i)].code, score=float(round(float(fused[i]), 4)), path=self.specs[int(i)].path,
                      kind=self.specs[int(i)].kind, functions=self.specs[int(i)].functions, semantic=float(sem[i]),
                      lexical=float(lex[i]), example="") for i in top]

    def _zero(self) -> np.ndarray:
        return np.zeros(2 * self.embedder.dim + self.embedder.second_dim, dtype=np.float32)

    def _fill_vectors(self, texts: list[str], vectors: list[Any]) -> int:
        missing = [i for i, v in enumerate(vectors) if v is None]
        if not missing or len(missing) > self.config.max_embed_on_build:
            return 0
        fresh = self.embedder.embed_examples([texts[i] for i in missing])
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
        n = len(self.specs)
        sem = self.semantic_scores(qvec)
        lex = self.bm25.scores(features(question))
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
        lex_rows = self.lexical_scores(question) if len(top) else None
        for i in top:
            if fused[i] < 0:
                continue
            spec = self.specs[int(i)]
            lo = int(self.row_start[i])
            hi = int(self.row_start[i + 1]) if i + 1 < n else len(self.texts)
            # Rows are laid out node by node (every node has at least its profile row).
            assert lex_rows is not None
            closest = lo + int(np.argmax(self.matrix[lo:hi] @ qvec[:self.embedder.dim] + lex_rows[lo:hi]))
            out.append(Match(code=spec.code, score=float(round(float(fused[i]), 4)), path=spec.path, kind=spec.kind,
                             functions=spec.functions, semantic=float(sem[i]), lexical=float(lex[i]),
                             example=self.texts[closest]))
        return out


_SKIP = np.zeros(0, dtype=np.float32)  # marker: the profile row has no semantic vector


@dataclass(frozen=True)
class _Space:
    """One embedding part's whitened space: the centring mean, the whitening transform (None: plain cosines),
    unit node and domain centroids in that space, and unit plain node centroids."""

    mu: np.ndarray
    transform: np.ndarray | None
    nodes: np.ndarray
    domains: np.ndarray
    raw: np.ndarray

    @classmethod
    def build(cls, part: np.ndarray, index: IntentIndex, present: np.ndarray, counts: np.ndarray, n_domains: int,
              shrinkage: float) -> _Space:
        rows = part.astype(np.float64)
        dim, n = rows.shape[1], len(counts)
        has = counts > 0
        sums = np.add.reduceat(rows, index.row_start, axis=0) if len(rows) else np.zeros((n, dim))
        means = sums / np.maximum(counts, 1.0)[:, None]
        mu = rows[present].mean(axis=0) if present.any() else np.zeros(dim)
        transform: np.ndarray | None = None
        if shrinkage > 0 and present.any():
            dev = rows[present] - means[index.row_node[present]]
            cov = dev.T @ dev / max(1, len(dev))
            eig, vecs = np.linalg.eigh(cov)
            eig = np.clip(eig, 0.0, None)
            ridge = shrinkage * float(eig.mean())
            if ridge > 0:
                transform = ((vecs / np.sqrt(eig + ridge)) @ vecs.T).astype(np.float32)
        if transform is None:
            mu = np.zeros(dim)  # plain cosines: no centring either
        centred = np.where(has[:, None], means - mu, 0.0).astype(np.float32)
        # A domain's centroid: the mean of its nodes' centred centroids, in the same space.
        domain_sums = np.zeros((n_domains, dim), dtype=np.float32)
        np.add.at(domain_sums, index._group[has], centred[has])
        if transform is not None:
            centred, domain_sums = centred @ transform, domain_sums @ transform
        return cls(mu=mu.astype(np.float32), transform=transform, nodes=np.ascontiguousarray(_unit(centred)),
                   domains=np.ascontiguousarray(_unit(domain_sums)), raw=_unit(means.astype(np.float32)))

    def question(self, q: np.ndarray) -> np.ndarray:
        """A question's part, centred and whitened like the examples, as a unit vector."""
        out = q - self.mu if self.transform is None else (q - self.mu) @ self.transform
        return cast(np.ndarray, out / (float(np.linalg.norm(out)) or 1.0))  # numpy types arithmetic as Any


def _unit(rows: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return cast(np.ndarray, (rows / norms).astype(np.float32))  # numpy types arithmetic as Any


def timed_route(index: IntentIndex, question: str, **kw: Any) -> tuple[list[Match], int]:
    """route() and its cost in whole milliseconds (as the API reports it)."""
    start = time.perf_counter()
    matches = index.route(question, **kw)
    return matches, int(round((time.perf_counter() - start) * 1000))
