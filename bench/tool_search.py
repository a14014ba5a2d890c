"""Tool search benchmark: top-5 hit rate on the labelled intent questions (English, Chinese) and search latency.

Run: .venv/bin/python bench/tool_search.py [--functions 1000] [--queries 200] [--split heldout|dev]

The functions are the labelled tree's (tests/fixtures/intents/tree.yaml: each topic names its functions) plus
distractor topics' functions up to --functions, each with the topic's name as title and its description (as
bench/intents.py builds them). A question is a hit when one of its topic's functions is in the top 5. It is
measured with every signal (function text, BM25, the intent router over the labelled tree, or with
--distractor-intents over every topic; no usage prior: a bench has no history) and, beside it, with the function text alone (no intent examples), so what each brings shows.
Latency: the whole search (embedding the question by the second model, routing on that vector, scoring) per
unique question, the index alone, and beside it the route through the main model (e5 and USE) the search used
first, for the ratio.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agents_app.runtime.function_search import FunctionDoc, build_index, search
from agents_app.runtime.intents import IntentEmbedder, IntentIndex
from bench._common import pct
from bench.intents import CachedEmbedder, specs_of
from tests.fixtures.intents import distractors, load_dev, load_heldout, load_tree


def docs_of(nodes: list[dict[str, Any]]) -> list[FunctionDoc]:
    out, seen = [], set()
    for n in nodes:
        for ref in n.get("functions", []):
            if ref not in seen:
                seen.add(ref)
                out.append(FunctionDoc(ref, n["name"], f"{n.get('description', n['name'])}. Returns JSON."))
    return out


def hit_rate(index: Any, questions: dict[str, dict[str, list[str]]], want: dict[str, set[str]], lang: str,
             **kw: Any) -> tuple[float, int, list[str]]:
    hits = total = 0
    misses = []
    for code, langs in questions.items():
        if not want.get(code):
            continue
        for q in langs[lang]:
            got = [h.name for h in search(index, q, top_k=5, **kw)]
            total += 1
            if want[code] & set(got):
                hits += 1
            else:
                misses.append(f"{q!r}: want {sorted(want[code])}, got {got[:3]}")
    return hits / max(1, total), total, misses


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--functions", type=int, default=1000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--split", choices=["heldout", "dev"], default="heldout")
    parser.add_argument("--misses", action="store_true")
    parser.add_argument("--distractor-intents", action="store_true",
                        help="give the distractor functions intents with examples too (embeds ~5 examples each once; "
                             "slow on a busy machine); by default intents cover the labelled tree only")
    args = parser.parse_args()
    embedder = IntentEmbedder(threads=1, cache_size=1024)
    cache = CachedEmbedder(embedder, Path(__file__).resolve().parents[1] / "var" / "bench-intent-vectors.pkl")
    tree = load_tree()
    base = docs_of(tree)
    nodes = tree + distractors(max(0, args.functions - len(base)))
    docs = docs_of(nodes)[: args.functions]
    t0 = time.perf_counter()
    router = IntentIndex(specs_of(nodes if args.distractor_intents else tree, cache), embedder)
    t1 = time.perf_counter()
    index = build_index(docs, embedder.embed_second)
    t2 = time.perf_counter()
    print(f"{len(docs)} functions; intent index built in {t1 - t0:.1f} s (example vectors cached in var/), "
          f"function index (USE vectors of {len(docs)} descriptions) in {t2 - t1:.1f} s; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    questions = load_heldout() if args.split == "heldout" else load_dev()
    want = {n["code"]: set(n.get("functions", [])) for n in tree}
    print(f"\ntop-5 hit rate on the {args.split} questions (target >= 95%):")
    for label, kw in (("all signals", {"embedder": embedder, "router": router}),
                      ("function text only", {"embedder": embedder, "router": None})):
        for lang in ("en", "zh"):
            rate, n, misses = hit_rate(index, questions, want, lang, **kw)
            print(f"  {label:>18} {lang}: {rate:6.1%} (n={n})")
            if args.misses:
                for m in misses:
                    print("     ", m)
    queries = [q for v in questions.values() for q in v["en"] + v["zh"]]
    embedder.embed(["warm up"])
    whole, index_only, main_model = [], [], []
    fresh = IntentEmbedder(threads=1, cache_size=1024)  # the same model, nothing remembered: unique questions
    router.embedder = fresh
    for i in range(args.queries):
        q = f"{queries[i % len(queries)]} ({i})"  # unique: no vector cache hit
        start = time.perf_counter()
        search(index, q, embedder=fresh, router=router, top_k=5)
        whole.append((time.perf_counter() - start) * 1000)
        # The search as it was first built, for the ratio: the intent router's full route (e5 and USE).
        q2 = f"{q} again"
        start = time.perf_counter()
        full = fresh.embed([q2])[0]
        intents = {f: m.score for m in router.route(q2, top_k=3) for f in m.functions}
        index.search(q2, qvec=full[-fresh.second_dim:], intents=intents, top_k=5)
        main_model.append((time.perf_counter() - start) * 1000)
        qvec = fresh.embed_second([q])[0]
        start = time.perf_counter()
        index.search(q, qvec=qvec, top_k=5)
        index_only.append((time.perf_counter() - start) * 1000)
    print(f"\nsearch latency at {len(docs)} functions, {args.queries} unique questions (target p50 <= 20 ms):")
    print(f"  whole search (embed + route + score): p50 {pct(whole, 50):.2f} ms  p95 {pct(whole, 95):.2f} ms")
    print(f"  with the main model's route (before):  p50 {pct(main_model, 50):.2f} ms  p95 {pct(main_model, 95):.2f} ms"
          f"  ({pct(main_model, 50) / max(pct(whole, 50), 1e-9):.1f}x the search's p50)")
    print(f"  scoring alone (question vector given):  p50 {pct(index_only, 50):.3f} ms  p95 {pct(index_only, 95):.3f} ms")
    print(f"  load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
