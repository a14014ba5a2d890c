"""Choose the intent router's settings on the dev split (dev.yaml); held-out paraphrases are never read.

Run: .venv/bin/python bench/intents_tune.py [--nodes 1000]

Two steps. First a ranking grid: for each whitening shrinkage, passage weight, domain weight and lexical weight
it prints dev top-1 per language at 42 topics and at --nodes (distractors built as in bench/intents.py). Top-1
depends only on the sum `semantic + r * lexical` (r, the lexical weight relative to the semantic score), so the
grid is over r and the 0..1 mapping is left for the second step. Second, calibration: for the chosen settings,
semantic_floor and semantic_ceiling (with semantic_weight = span / (span + r)) are solved so that at the large
size the median score of right answers and the median best score when the true topic is left out (what a
question about something absent looks like) stay where the earlier routers had them (0.64 and 0.53), so that
TOOLHUB_INTENT_THRESHOLD keeps its meaning; the resulting RouterConfig is then run through route() to print
its accuracy and medians as routed. RouterConfig's defaults were picked from this output: the best dev mean,
preferring (among settings within one dev question of it) the middle of a plateau of good settings over a lone
peak, and the simpler setting (no passage half) on a tie.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import os
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agents_app.runtime.intents import E5Embedder, IntentIndex, RouterConfig  # noqa: E402
from agents_app.runtime.intents.lexical import features  # noqa: E402
from bench.intents import CachedEmbedder, specs_of  # noqa: E402
from tests.fixtures.intents import distractors, load_dev, load_tree  # noqa: E402

RIGHT, ABSENT = 0.64, 0.53  # the calibration the fallback threshold was set against


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
    """Dev top-1 per language through route(), and the two calibration medians."""
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


def channels(index: IntentIndex, embedder: Precomputed, dev: dict[str, dict[str, list[str]]],
             domain_weight: float) -> list[tuple[str, int, np.ndarray, np.ndarray]]:
    """(language, true position, semantic scores, lexical scores) per dev question."""
    index.config = dataclasses.replace(index.config, domain_weight=domain_weight)
    rows = []
    for code, langs in dev.items():
        for lang in ("en", "zh"):
            for q in langs[lang]:
                qvec = embedder.embed([q])[0]
                rows.append((lang, index.position[code], index.semantic_scores(qvec),
                             np.clip(index.bm25.scores(features(q)), 0.0, 1.0)))
    return rows


def top1(rows: list[tuple[str, int, np.ndarray, np.ndarray]], r: float) -> dict[str, float]:
    out = {}
    for lang in ("en", "zh"):
        mine = [int(np.argmax(sem + r * lex)) == want for lg, want, sem, lex in rows if lg == lang]
        out[lang] = sum(mine) / len(mine)
    return out


def calibrate(rows: list[tuple[str, int, np.ndarray, np.ndarray]], r: float) -> tuple[float, float, float]:
    """(semantic_floor, semantic_ceiling, semantic_weight) putting the two medians at RIGHT and ABSENT."""
    right, absent = [], []
    for _, want, sem, lex in rows:
        t = sem + r * lex
        if int(np.argmax(t)) == want:
            right.append(float(t[want]))
        absent.append(float(np.max(np.delete(t, want))))
    t_r, t_a = statistics.median(right), statistics.median(absent)
    scale = (t_r - t_a) / (RIGHT - ABSENT)  # = span + r
    floor = t_r - RIGHT * scale
    span = scale - r
    return floor, floor + span, span / scale


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
    results = []
    print("ranking grid (dev top-1):", flush=True)
    for shrinkage, passage in itertools.product((0.0, 1.0, 3.0, 10.0), (0.0, 0.6)):
        base = RouterConfig(whiten_shrinkage=shrinkage, passage_weight=passage)
        small = IntentIndex(small_specs, embedder, base)  # type: ignore[arg-type]
        big = IntentIndex(big_specs, embedder, base)  # type: ignore[arg-type]
        for domain in (0.0, 0.25, 0.5, 1.0):
            rows_s, rows_b = channels(small, embedder, dev, domain), channels(big, embedder, dev, domain)
            # Plain cosines are ~4x more compressed than whitened ones: scale the lexical weights to match.
            for r in ((0.025, 0.05, 0.1) if shrinkage == 0 else (0.05, 0.1, 0.2, 0.3)):
                s, b = top1(rows_s, r), top1(rows_b, r)
                mean = (s["en"] + s["zh"] + b["en"] + b["zh"]) / 4
                results.append((mean, shrinkage, passage, domain, r))
                print(f"  shrinkage {shrinkage:4.1f} passage {passage:.1f} domain {domain:.2f} lexical r {r:.3f}:  "
                      f"{len(small_specs)} en {s['en']:.3f} zh {s['zh']:.3f}   {len(big_specs)} en {b['en']:.3f} "
                      f"zh {b['zh']:.3f}   mean {mean:.3f}", flush=True)
    best = max(results)
    print(f"\nbest dev mean {best[0]:.3f}: shrinkage {best[1]}, passage {best[2]}, domain {best[3]}, r {best[4]}")
    defaults = RouterConfig()
    chosen = (defaults.whiten_shrinkage, defaults.passage_weight, defaults.domain_weight)
    big = IntentIndex(big_specs, embedder, RouterConfig(whiten_shrinkage=chosen[0], passage_weight=chosen[1]))  # type: ignore[arg-type]
    rows_b = channels(big, embedder, dev, chosen[2])
    r = (1.0 - defaults.semantic_weight) * (defaults.semantic_ceiling - defaults.semantic_floor) / defaults.semantic_weight
    floor, ceiling, weight = calibrate(rows_b, r)
    print(f"\ndefaults now: {defaults}\n  (lexical r {r:.3f}); calibration for them: semantic_floor {floor:.3f}, "
          f"semantic_ceiling {ceiling:.3f}, semantic_weight {weight:.3f}")
    for label, specs in ((f"{len(small_specs)}", small_specs), (f"{len(big_specs)}", big_specs)):
        got = evaluate(IntentIndex(specs, embedder, defaults), dev)  # type: ignore[arg-type]
        print(f"  as routed with the defaults, {label} nodes: en {got['en']:.3f} zh {got['zh']:.3f}   medians right "
              f"{got['right']:.2f} absent {got['absent']:.2f}")


if __name__ == "__main__":
    main()
