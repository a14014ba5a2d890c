"""Django-free intent routing: a lexical channel (words + CJK character n-grams) fused with sentence embeddings."""

from agents_app.runtime.intents.embedder import EMBEDDING_MODEL, Embedder, IntentEmbedder, default_embedder
from agents_app.runtime.intents.lexical import features
from agents_app.runtime.intents.router import IntentIndex, IntentSpec, Match, RouterConfig

__all__ = [
    "EMBEDDING_MODEL",
    "Embedder",
    "IntentEmbedder",
    "IntentIndex",
    "IntentSpec",
    "Match",
    "RouterConfig",
    "default_embedder",
    "features",
]
