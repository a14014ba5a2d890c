"""Choose the intent router's settings on the dev split (dev.yaml); held-out paraphrases are never read.

Run: .venv/bin/python bench/intents_tune.py [--nodes 1000]

Three steps. First a ranking grid: for each whitening shrinkage, passage weight, plain-cosine share, domain weight
and lexical weight it prints dev top-1 per language at 42 topics and at --nodes (distractors built as in
bench/intents.py), with the second model (USE) at its default weight (`--no-grid` skips this step). Top-1 depends
only on the sum `semantic + r * lexical` (r, the lexical weight relative to the semantic score), so the grid is
over r and the 0..1 mapping is left for the last step. Second, the second model's weight, the rest at the
defaults. Third, calibration: semantic_floor and semantic_ceiling (with semantic_weight = span / (span + r)) are
solved so that at the large size the median score of right answers stays at 0.64 and the median best score of
questions about nothing in the tree (OFF_TOPIC, calibration only) stays where the plain-cosine router had it
(0.41), so that TOOLHUB_INTENT_THRESHOLD keeps its meaning; the resulting RouterConfig is run through route()
beside the plain-cosine router, printing accuracy, medians, and how many dev and off-topic questions fall below
the threshold at both sizes.

RouterConfig's defaults were picked from this output: with whitening, a domain prior and a plain share of 3, every
shrinkage tried (1, 3, 10) routes 2-4 more dev questions per size (of 168) than the plain-cosine router (3, the
middle, is also the best); the plain share is
the smallest (3, of 1, 1.5, 2, 3) whose calibrated score falls back on no more right answers at 42 topics than
the plain-cosine router (1:1 was 3 dev questions better at 1,000 nodes but fell back on 17/168 right answers at
42 topics); among those settings, the simplest (no passage half) within one dev question of the best.
The second model's weight (0.177) is the smallest that reaches the plateau of the dev mean (0.929 from 0.917
without it; 0.27 and 0.35 tie); it enters relative to e5's best node, so the calibration above still holds (1,000
nodes: right answers falling back 0/168, off-topic 5/24; 42 topics: 0/168 and 12/24). With it on, the grid's best
adds the passage half (0.6: dev mean 0.938), but calibrated it falls back on 3/168 right answers at 42 topics, so
the plain-share rule above keeps it out.
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

from agents_app.runtime.intents import IntentEmbedder, IntentIndex, RouterConfig
from agents_app.runtime.intents.lexical import features
from bench.intents import CachedEmbedder, specs_of
from tests.fixtures.intents import distractors, load_dev, load_tree

RIGHT = 0.64  # the median right answer's score the fallback threshold was set against
THRESHOLD = 0.35  # TOOLHUB_INTENT_THRESHOLD's default
# Questions about nothing in the tree (calibration only, never accuracy): what the fallback threshold is for.
# Their median best score under each candidate is printed beside the plain-cosine router's.
OFF_TOPIC = [
    "how do I make sourdough bread at home", "write a short poem about autumn leaves",
    "what is the integral of x squared", "who won the football world cup in 1998",
    "how often should I water a cactus", "explain how photosynthesis works",
    "what are good names for a golden retriever puppy", "how many bones are in the human body",
    "recommend a board game for four players", "why is the sky blue", "how do I tie a bowline knot",
    "what rhymes with orange",
    "怎么在家做红烧肉", "写一首关于月亮的诗", "一加一为什么等于二", "恐龙是怎么灭绝的", "仙人掌多久浇一次水",
    "给我的小狗起个名字", "人体有多少块骨头", "推荐一个四个人玩的桌游", "天空为什么是蓝色的", "怎么系鞋带不容易松",
    "光合作用是什么原理", "唐朝一共有多少个皇帝",
]
PLAIN = RouterConfig(semantic_weight=0.8, passage_weight=0.6, whiten_shrinkage=0.0, domain_weight=0.0,
                     second_weight=0.0, semantic_floor=0.76,
                     semantic_ceiling=0.94)  # the router before whitening (and before USE), for reference
SECOND_WEIGHTS = (0.0, 0.09, 0.177, 0.27, 0.35)


class Precomputed:
    """Question vectors embedded once for every candidate (they do not depend on the settings)."""

    def __init__(self, inner: IntentEmbedder, questions: list[str]) -> None:
        self.model, self.dim, self.second_dim = inner.model, inner.dim, inner.second_dim
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


def off_topic(index: IntentIndex, embedder: Precomputed) -> list[tuple[np.ndarray, np.ndarray]]:
    return [(index.semantic_scores(embedder.embed([q])[0]), np.clip(index.bm25.scores(features(q)), 0.0, 1.0))
            for q in OFF_TOPIC]


def best(rows: list[tuple[np.ndarray, np.ndarray]], r: float, floor: float, ceiling: float) -> list[float]:
    """The best score of each question under a mapping (as route() computes it)."""
    weight = (ceiling - floor) / (ceiling - floor + r)
    return [float(np.max(weight * np.clip((sem - floor) / (ceiling - floor), 0, 1) + (1 - weight) * lex))
            for sem, lex in rows]


def calibrate(rows: list[tuple[str, int, np.ndarray, np.ndarray]], r: float,
              off: list[tuple[np.ndarray, np.ndarray]], off_target: float) -> tuple[float, float, float, float]:
    """(semantic_floor, semantic_ceiling, semantic_weight, absent median) putting the median right answer at RIGHT
    and the median off-topic question at `off_target`."""
    right, absent = [], []
    for _, want, sem, lex in rows:
        t = sem + r * lex
        if int(np.argmax(t)) == want:
            right.append(float(t[want]))
        absent.append(float(np.max(np.delete(t, want))))
    t_r = statistics.median(right)
    t_o = statistics.median(float(np.max(sem + r * lex)) for sem, lex in off)
    scale = (t_r - t_o) / (RIGHT - off_target)  # = span + r
    floor = t_r - RIGHT * scale
    span = scale - r
    return floor, floor + span, span / scale, (statistics.median(absent) - floor) / scale


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--no-grid", action="store_true", help="skip the ranking grid (the other steps only)")
    args = parser.parse_args()
    inner = IntentEmbedder(threads=1, cache_size=0)
    cache = CachedEmbedder(inner, Path(__file__).resolve().parents[1] / "var" / "bench-intent-vectors.pkl")
    tree, dev = load_tree(), load_dev()
    questions = [q for v in dev.values() for q in v["en"] + v["zh"]] + OFF_TOPIC
    embedder = Precomputed(inner, questions)
    small_specs = specs_of(tree, cache)
    big_specs = specs_of(tree + distractors(max(0, args.nodes - len(small_specs))), cache)
    results: list[tuple[float, ...]] = []
    plain_big = IntentIndex(big_specs, embedder, PLAIN)  # type: ignore[arg-type]
    pr = (1 - PLAIN.semantic_weight) * (PLAIN.semantic_ceiling - PLAIN.semantic_floor) / PLAIN.semantic_weight
    off_target = statistics.median(best(off_topic(plain_big, embedder), pr, PLAIN.semantic_floor,
                                        PLAIN.semantic_ceiling))
    print(f"off-topic median best score, plain-cosine router at {len(big_specs)} nodes: {off_target:.2f}")
    print("ranking grid (dev top-1; absent median once calibrated at the large size):", flush=True)
    if not args.no_grid:
        results = ranking_grid(small_specs, big_specs, embedder, dev, off_target)
    if results:
        top = max(results)
        print(f"\nbest dev mean {top[0]:.3f}: shrinkage {top[1]}, passage {top[2]}, plain {top[3]}, domain {top[4]}, "
              f"r {top[5]:.4f}")
    defaults = RouterConfig()
    r = (1.0 - defaults.semantic_weight) * (defaults.semantic_ceiling - defaults.semantic_floor) / defaults.semantic_weight
    print("\nsecond model (USE) weight, the rest at the defaults (dev top-1):")
    for weight in SECOND_WEIGHTS:
        config = dataclasses.replace(defaults, second_weight=weight)
        small = IntentIndex(small_specs, embedder, config)  # type: ignore[arg-type]
        big = IntentIndex(big_specs, embedder, config)  # type: ignore[arg-type]
        s, b = (top1(channels(x, embedder, dev, defaults.domain_weight), r) for x in (small, big))
        print(f"  second_weight {weight:.3f}:  {len(small_specs)} en {s['en']:.3f} zh {s['zh']:.3f}   "
              f"{len(big_specs)} en {b['en']:.3f} zh {b['zh']:.3f}   mean {(s['en'] + s['zh'] + b['en'] + b['zh']) / 4:.3f}",
              flush=True)
    chosen = RouterConfig(whiten_shrinkage=defaults.whiten_shrinkage, passage_weight=defaults.passage_weight,
                          plain_weight=defaults.plain_weight, second_weight=defaults.second_weight)
    big = IntentIndex(big_specs, embedder, chosen)  # type: ignore[arg-type]
    rows_b = channels(big, embedder, dev, defaults.domain_weight)
    floor, ceiling, weight, _ = calibrate(rows_b, r, off_topic(big, embedder), off_target)
    print(f"\ndefaults now: {defaults}\n  (lexical r {r:.3f}); calibration for them: semantic_floor {floor:.3f}, "
          f"semantic_ceiling {ceiling:.3f}, semantic_weight {weight:.3f}")
    report_as_routed(small_specs, big_specs, embedder, dev, questions, defaults)


def ranking_grid(small_specs: list[Any], big_specs: list[Any], embedder: Any, dev: dict[str, Any],
                 off_target: float) -> list[tuple[float, ...]]:
    """Dev top-1 over the ranking settings: (mean, shrinkage, passage, plain, domain, r) per point, printed."""
    results: list[tuple[float, ...]] = []
    for shrinkage, passage, plain in itertools.product((0.0, 1.0, 3.0, 10.0), (0.0, 0.6), (0.0, 1.0, 3.0)):
        if shrinkage == 0 and plain:
            continue
        base = RouterConfig(whiten_shrinkage=shrinkage, passage_weight=passage, plain_weight=plain)
        small = IntentIndex(small_specs, embedder, base)
        big = IntentIndex(big_specs, embedder, base)
        for domain in (0.0, 0.25, 0.5, 1.0):
            rows_s, rows_b = channels(small, embedder, dev, domain), channels(big, embedder, dev, domain)
            # Plain cosines are ~4x more compressed than whitened ones, and a plain share compresses them again.
            for r in ((0.025, 0.05, 0.1) if shrinkage == 0 else [x / (1 + plain) for x in (0.05, 0.1, 0.2)]):
                s, b = top1(rows_s, r), top1(rows_b, r)
                mean = (s["en"] + s["zh"] + b["en"] + b["zh"]) / 4
                *_, absent = calibrate(rows_b, r, off_topic(big, embedder), off_target)
                results.append((mean, shrinkage, passage, plain, domain, r))
                print(f"  shrinkage {shrinkage:4.1f} passage {passage:.1f} plain {plain:.1f} domain {domain:.2f} "
                      f"lexical r {r:.3f}:  {len(small_specs)} en {s['en']:.3f} zh {s['zh']:.3f}   {len(big_specs)} "
                      f"en {b['en']:.3f} zh {b['zh']:.3f}   mean {mean:.3f}   absent {absent:.2f}", flush=True)
    return results


def report_as_routed(small_specs: list[Any], big_specs: list[Any], embedder: Any, dev: dict[str, Any],
                     questions: list[str], defaults: RouterConfig) -> None:
    """Both sizes as routed, plain-cosine router against the defaults: accuracy, score medians, below threshold."""
    for label, specs in ((f"{len(small_specs)}", small_specs), (f"{len(big_specs)}", big_specs)):
        for name, config in (("plain-cosine router", PLAIN), ("defaults", defaults)):
            index = IntentIndex(specs, embedder, config)
            got = evaluate(index, dev)
            off = [index.route(q, top_k=1)[0].score for q in OFF_TOPIC]
            tops = [index.route(q, top_k=1)[0].score for q in questions if q not in OFF_TOPIC]
            print(f"  as routed, {name}, {label} nodes: en {got['en']:.3f} zh {got['zh']:.3f}   medians right "
                  f"{got['right']:.2f} absent {got['absent']:.2f} off-topic {statistics.median(off):.2f}; below "
                  f"{THRESHOLD}: dev {sum(t < THRESHOLD for t in tops)}/{len(tops)}, off-topic "
                  f"{sum(t < THRESHOLD for t in off)}/{len(off)}")


if __name__ == "__main__":
    main()
