"""Choose the intent router's fusion settings on the dev split (dev.yaml); held-out paraphrases are never read.

Run: .venv/bin/python bench/intents_tune.py [--nodes 1000]

For each candidate RouterConfig it prints dev top-1 per language at 42 topics and at --nodes (distractors built
as in bench/intents.py), and two calibration figures at the large size: the median score of right answers and
the median best score when the true topic is left out (what a question about something absent looks like).
The defaults of RouterConfig were picked from this table: among the settings within one dev question of the
best mean, the one whose calibration is closest to the previous router's (medians 0.64 and 0.53 on the same
split), so that TOOLHUB_INTENT_THRESHOLD keeps its meaning.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agents_app.runtime.intents import E5Embedder, IntentIndex, RouterConfig  # noqa: E402
from bench.intents import CachedEmbedder, specs_of  # noqa: E402
from tests.fixtures.intents import distractors, load_dev, load_tree  # noqa: E402


class Precomputed:
    """Question vectors embedded once for every candidate (they do not depend on the settings)."""

    def __init__(self, inner: E5Embedder, questions: list[str]) -> None:
        self.model, self.dim = inner.model, inner.dim
        self.vectors = dict(zip(questions, inner.embed(questions), strict=True))

    def embed(self, texts: list[str]) -> Any:
        return self.vectors[texts[0]][None, :]

    def embed_examples(self, texts: list[str]) -> Any:
        raise AssertionError("example vectors come from the bench cache")


def evaluate(index: IntentIndex, dev: dict[str, dict[str, list[str]]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    right, absent = [], []
    codes = [s.code for s in index.specs]
    for lang in ("en", "zh"):
        hits = total = 0
        for code, langs in dev.items():
            for q in langs[lang]:
                got = index.route(q, top_k=1)
                total += 1
                if got and got[0].code == code:
                    hits += 1
                    right.append(got[0].score)
                others = index.route(q, top_k=1, eligible=[c for c in codes if c != code])
                absent.append(others[0].score if others else 0.0)
        out[lang] = hits / total
    out["right"], out["absent"] = statistics.median(right), statistics.median(absent)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=1000)
    args = parser.parse_args()
    inner = E5Embedder(threads=1, cache_size=0)
    cache = CachedEmbedder(inner, Path(__file__).resolve().parents[1] / "var" / "bench-intent-vectors.pkl")
    tree, dev = load_tree(), load_dev()
    questions = [q for v in dev.values() for q in v["en"] + v["zh"]]
    embedder = Precomputed(inner, questions)
    small_specs = specs_of(tree, cache)
    big_specs = specs_of(tree + distractors(max(0, args.nodes - len(small_specs))), cache)
    grid = itertools.product((0.0, 0.4, 0.6, 1.0), (0.1, 0.2, 0.3), ((0.72, 0.92), (0.76, 0.94)))
    rows = []
    for passage, lexical, (floor, ceiling) in grid:
        config = RouterConfig(passage_weight=passage, semantic_weight=1.0 - lexical, semantic_floor=floor,
                              semantic_ceiling=ceiling)
        small = evaluate(IntentIndex(small_specs, embedder, config), dev)  # type: ignore[arg-type]
        big = evaluate(IntentIndex(big_specs, embedder, config), dev)  # type: ignore[arg-type]
        mean = (small["en"] + small["zh"] + big["en"] + big["zh"]) / 4
        rows.append((mean, passage, lexical, floor, ceiling, small, big))
        print(f"passage {passage:.1f} lexical {lexical:.1f} floor {floor:.2f} ceiling {ceiling:.2f}:  "
              f"{len(small_specs)} en {small['en']:.3f} zh {small['zh']:.3f}   {len(big_specs)} en {big['en']:.3f} "
              f"zh {big['zh']:.3f}   mean {mean:.3f}   medians right {big['right']:.2f} absent {big['absent']:.2f}",
              flush=True)
    best = max(rows, key=lambda r: r[0])
    print(f"\nbest dev mean {best[0]:.3f}: passage_weight {best[1]}, lexical {best[2]}, floor {best[3]}, "
          f"ceiling {best[4]}; defaults now: {RouterConfig()}")


if __name__ == "__main__":
    main()
