"""Django-free intent routing: a lexical channel (words + CJK character n-grams) fused with sentence embeddings."""

from agents_app.runtime.intents.embedder import EMBEDDING_MODEL, E5Embedder, Embedder, default_embedder
from agents_app.runtime.intents.lexical import features
from agents_app.runtime.intents.router import IntentIndex, IntentSpec, Match, RouterConfig

__all__ = [
    "EMBEDDING_MODEL",
    "E5Embedder",
    "Embedder",
    "IntentIndex",
    "IntentSpec",
    "Match",
    "RouterConfig",
    "default_embedder",
    "features",
]
