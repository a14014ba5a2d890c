"""Django-free intent routing: a lexical channel (words + CJK character n-grams) fused with sentence embeddings.

The names below load on first use (PEP 562): importing a submodule (`policy`, what the routing service needs at
import) runs this file, and the router and the embedder import numpy, which only a route or an embedding needs
(issue 35: every Django process's start imports the routing service).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.lazy import lazy_names

if TYPE_CHECKING:
    from agents_app.runtime.intents.embedder import (
        EMBEDDING_MODEL,
        Embedder,
        IntentEmbedder,
        default_embedder,
    )
    from agents_app.runtime.intents.lexical import features
    from agents_app.runtime.intents.router import IntentIndex, IntentSpec, Match, RouterConfig

_HOMES = {
    "EMBEDDING_MODEL": "embedder",
    "Embedder": "embedder",
    "IntentEmbedder": "embedder",
    "default_embedder": "embedder",
    "features": "lexical",
    "IntentIndex": "router",
    "IntentSpec": "router",
    "Match": "router",
    "RouterConfig": "router",
}

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


__getattr__ = lazy_names(__name__, _HOMES)
