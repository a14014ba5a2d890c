"""The deterministic embedder the API-level intent tests route on: what those tests rely on it for."""

from __future__ import annotations

import numpy as np

from agents_app.runtime.intents import default_embedder
from agents_app.runtime.intents.embedder import DIM, EXAMPLE_DIM, QUESTION_DIM
from tests.fixtures.hashed_embedder import SHARED, HashedEmbedder, hashed_embedder

TEXTS = ["will it rain in Hangzhou tomorrow", "will it rain in Shanghai tomorrow", "list the open support tickets",
         "杭州明天会下雨吗"]


def test_same_vectors_everywhere_in_the_real_embedders_widths() -> None:
    one, other = HashedEmbedder(), HashedEmbedder()
    assert np.array_equal(one.embed(TEXTS), other.embed(TEXTS))  # no seed, no process-dependent hash
    assert one.embed(TEXTS).shape == (4, QUESTION_DIM) and one.embed_examples(TEXTS).shape == (4, EXAMPLE_DIM)
    assert np.allclose(np.linalg.norm(one.embed(TEXTS)[:, :DIM], axis=1), 1.0)


def test_texts_are_as_close_as_the_words_they_share() -> None:
    main = HashedEmbedder().embed(TEXTS)[:, :DIM]
    rain, rain_elsewhere, tickets, chinese_rain = main
    assert rain @ rain_elsewhere > rain @ tickets
    assert abs(float(rain @ tickets) - SHARED) < 0.05  # unrelated texts sit where a real model's do
    assert chinese_rain @ rain < rain @ rain_elsewhere  # no shared features across scripts: no translation


def test_it_is_the_process_embedder_only_inside_the_block() -> None:
    real = default_embedder()
    with hashed_embedder() as fake:
        assert default_embedder() is fake  # type: ignore[comparison-overlap]  # the same interface, not the same class
    assert default_embedder() is real
