"""The Django-free router: lexical features for Chinese, fusion, eligibility and the turn policy."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from agents_app.runtime.intents import IntentIndex, IntentSpec, default_embedder, features
from agents_app.runtime.intents.policy import decide
from agents_app.runtime.intents.router import Match
from tests.waiting import scaled


def test_chinese_text_becomes_character_unigrams_and_bigrams() -> None:
    bag = features("北京天气怎么样")
    assert {"b:天气", "b:北京", "c:天", "c:气"} <= set(bag)
    assert "c:么" not in bag  # a function character says nothing about the intent
    assert set(features("Show my open tickets")) == {"w:open", "w:ticket"}


def _index() -> IntentIndex:
    specs = [
        IntentSpec(code="weather", name="Weather", kind="MCP", path=("info", "weather"), functions=("w__q",),
                   examples=("what's the weather like in Beijing today", "will it rain tomorrow", "北京今天天气怎么样")),
        IntentSpec(code="tickets", name="Tickets", kind="MCP", path=("ops", "tickets"), functions=("t__q",),
                   examples=("show me the open support tickets", "how many urgent tickets are unresolved", "查询待处理的工单")),
        IntentSpec(code="hello", name="Greetings", kind="SYSTEM", path=("hello",),
                   examples=("hello there", "你好", "thanks a lot")),
    ]
    return IntentIndex(specs, default_embedder())


def _embedder(cache_size: int) -> Any:
    """A new IntentEmbedder (its own LRU, counters and helper thread) on the models this process already loaded for
    `default_embedder()`: loading them maps ~135 MB of weights (2 to 4 s each time); what these tests check is the
    embedder around the models, which load once per process in production too."""
    from agents_app.runtime.intents import IntentEmbedder

    emb = IntentEmbedder(cache_size=cache_size)
    emb._e5, emb._use = default_embedder()._load()
    return emb


def test_routes_english_and_chinese_paraphrases_and_respects_eligibility() -> None:
    index = _index()
    assert index.route("is it going to be sunny in Shanghai")[0].code == "weather"
    assert index.route("上海明天会下雨吗")[0].code == "weather"
    assert index.route("华南地区还有哪些工单没处理")[0].code == "tickets"
    top = index.route("上海明天会下雨吗", eligible=["tickets", "hello"])
    assert "weather" not in [m.code for m in top]
    assert all(0.0 <= m.score <= 1.0 for m in index.route("anything at all"))


def _m(code: str, score: float, kind: str = "MCP", functions: tuple[str, ...] = ()) -> Match:
    return Match(code=code, score=score, path=(code,), kind=kind, functions=functions, semantic=0.0, lexical=0.0,
                 example="")


def test_policy_offers_matched_functions_knowledge_and_always_on() -> None:
    pool = ["a__x", "b__y", "kb__search", "c__z", "clock__now"]
    routing = decide([_m("a", 0.8, functions=("a__x",)), _m("kb", 0.75, "KB_AND_MCP", ("b__y",)), _m("c", 0.2)],
                     available=pool, threshold=0.35, limit=128, knowledge="kb__search", always_on=["clock__now"])
    assert routing.mode == "intent"
    assert routing.offered == ("a__x", "b__y", "kb__search", "clock__now")
    assert "matched a (0.80)" in routing.reason


def test_policy_below_threshold_offers_everything_capped_best_first() -> None:
    pool = [f"t__f{i}" for i in range(200)]
    routing = decide([_m("a", 0.2, functions=("t__f150",))], available=pool, threshold=0.35, limit=128)
    assert routing.mode == "fallback" and len(routing.offered) == 128
    assert routing.offered[0] == "t__f150"
    assert "below the threshold" in routing.reason and routing.notes


def test_policy_fallback_keeps_always_on_functions_within_the_cap() -> None:
    pool = [f"t__f{i}" for i in range(200)]
    routing = decide([_m("a", 0.2, functions=("t__f150",))], available=pool, threshold=0.35, limit=3,
                     always_on=["t__f199", "gone__fn"])
    assert routing.offered == ("t__f150", "t__f199", "t__f0")  # an always-on ref the run may not offer is skipped


def test_policy_system_intent_offers_no_tools() -> None:
    routing = decide([_m("hello", 0.9, "SYSTEM")], available=["a__x"], threshold=0.35, limit=128,
                     always_on=["a__x"])
    assert routing.mode == "system" and routing.offered == ()


def test_lexical_scores_are_tfidf_cosines_per_example_row() -> None:
    """The posting-list pass gives each row the cosine of its tf-idf vector with the question's."""
    import math

    import numpy as np

    index = _index()
    question = "查询上海待处理的工单 tickets"
    got = index.lexical_scores(question)
    q = features(question)
    n = len(index.texts)
    unknown = sum(((1.0 + math.log(c)) * math.log(n + 1) + 1.0) ** 2 for t, c in q.items() if t not in index.idf)
    qw = {t: (1.0 + math.log(c)) * index.idf[t] for t, c in q.items() if t in index.idf}
    qnorm = math.sqrt(sum(w * w for w in qw.values()) + unknown)
    for row, text in enumerate(index.texts):
        dw = {t: (1.0 + math.log(c)) * index.idf[t] for t, c in features(text).items()}
        dnorm = math.sqrt(sum(w * w for w in dw.values())) or 1.0
        want = sum(w * dw.get(t, 0.0) for t, w in qw.items()) / (qnorm * dnorm)
        assert math.isclose(float(got[row]), want, rel_tol=1e-4, abs_tol=1e-6), (text, got[row], want)
    assert got.dtype == np.float32 and np.count_nonzero(got) >= 2


def test_each_match_names_its_own_closest_example() -> None:
    matches = _index().route("will it rain in Beijing tomorrow", top_k=3)
    by_code = {m.code: m.example for m in matches}
    assert by_code["weather"] in ("will it rain tomorrow", "what's the weather like in Beijing today")
    assert by_code["tickets"] in ("show me the open support tickets", "how many urgent tickets are unresolved",
                                  "查询待处理的工单", "Tickets")


def test_query_vectors_are_cached_per_text_in_a_bounded_lru() -> None:
    emb = _embedder(cache_size=2)
    first = emb.embed(["will it rain tomorrow"])
    again = emb.embed(["will it rain tomorrow"])
    assert (emb.hits, emb.misses) == (1, 1) and (first == again).all()
    again[0, 0] = 42.0  # callers get a copy: the cached vector stays as it was
    assert emb.embed(["will it rain tomorrow"])[0, 0] == first[0, 0]
    emb.embed(["北京今天天气怎么样"])
    emb.embed(["hello there"])  # a third text evicts the least recently used ("will it rain tomorrow")
    emb.embed(["will it rain tomorrow"])
    assert emb.misses == 4
    emb.embed(["hello there", "你好"])  # batches (example embedding) are never cached
    assert (emb.hits, emb.misses) == (2, 4)
    off = _embedder(cache_size=0)
    off.embed(["hello there"])
    off.embed(["hello there"])
    assert off.hits == 0


def test_bm25_scores_each_node_document_between_0_and_1() -> None:
    from collections import Counter

    from agents_app.runtime.intents.lexical import Bm25

    docs = [features("查询华东地区待处理的工单 show open tickets"), features("北京今天天气怎么样 weather forecast"),
            Counter()]
    bm = Bm25(docs)
    hit = bm.scores(features("华东的工单 tickets"))
    assert hit.shape == (3,) and hit[0] > 0 and hit[1] == 0 and hit[2] == 0
    assert 0.0 < float(hit.max()) <= 1.0
    # A word no document has still counts in the ceiling: a question mostly about something else scores lower.
    assert bm.scores(features("华东的工单 tickets zebra giraffe"))[0] < hit[0]
    assert not bm.scores(features("zebra")).any() and not bm.scores(Counter()).any()


def test_examples_are_embedded_as_query_passage_and_use_and_long_questions_are_cut() -> None:
    import numpy as np

    from agents_app.runtime.intents.embedder import DIM, EXAMPLE_DIM, MAX_QUESTION_CHARS, QUESTION_DIM

    emb = _embedder(cache_size=0)
    rows = emb.embed_examples(["will it rain tomorrow", "北京今天天气怎么样"])
    assert rows.shape == (2, EXAMPLE_DIM)
    for part in (slice(0, DIM), slice(DIM, 2 * DIM), slice(2 * DIM, EXAMPLE_DIM)):  # each part is a unit vector
        assert np.allclose(np.linalg.norm(rows[:, part], axis=1), 1.0, atol=1e-4)
    # A question's e5 part is the example's query part for the same text, and its USE part the example's USE part;
    # the passage part is another vector.
    question = emb.embed(["will it rain tomorrow"])[0]
    assert question.shape == (QUESTION_DIM,)
    assert np.allclose(rows[0, :DIM], question[:DIM], atol=1e-5)
    assert np.allclose(rows[0, 2 * DIM:], question[DIM:], atol=1e-5)
    assert float(rows[0, :DIM] @ rows[0, DIM:2 * DIM]) < 0.999
    # USE puts the two languages' weather questions closer than either to an unrelated sentence.
    other = emb.embed(["assign ticket 4521 to Alice"])[0]
    assert float(rows[0, 2 * DIM:] @ rows[1, 2 * DIM:]) > float(rows[0, 2 * DIM:] @ other[DIM:])
    long = "will it rain tomorrow in Beijing " * 40
    assert len(long) > MAX_QUESTION_CHARS
    assert np.array_equal(emb.embed([long]), emb.embed([long[:MAX_QUESTION_CHARS]]))


def test_semantic_score_mixes_the_query_and_passage_centroids() -> None:
    import numpy as np

    from agents_app.runtime.intents import RouterConfig

    class Fixed:
        """Three orthogonal directions: examples' query and passage halves differ, so the mix is visible."""

        model, dim, second_dim = "fixed", 3, 0

        def embed(self, texts: Sequence[str]) -> np.ndarray:
            return np.asarray([[0.6, 0.8, 0.0]] * len(texts), dtype=np.float32)

        def embed_examples(self, texts: Sequence[str]) -> np.ndarray:
            return np.asarray([[1.0, 0.0, 0.0, 0.0, 1.0, 0.0]] * len(texts), dtype=np.float32)

    spec = IntentSpec(code="a", name="A", kind="MCP", path=("a",), examples=("x", "y"))
    # Whitening off: plain cosines with the two centroids.
    index = IntentIndex([spec], Fixed(), RouterConfig(passage_weight=0.25, whiten_shrinkage=0.0))
    match = index.route("anything")[0]
    assert abs(match.semantic - (0.75 * 0.6 + 0.25 * 0.8)) < 1e-5


class _Vectors:
    """Examples and questions as given vectors (by text), so the semantic channel can be checked by hand."""

    model, second_dim = "vectors", 0

    def __init__(self, table: dict[str, list[float]]) -> None:
        self.table = {t: np.asarray(v, dtype=np.float32) / np.linalg.norm(v) for t, v in table.items()}
        self.dim = len(next(iter(table.values())))

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.stack([self.table[t] for t in texts])

    def embed_examples(self, texts: Sequence[str]) -> np.ndarray:
        return np.stack([np.concatenate([self.table[t], self.table[t]]) for t in texts])


def test_whitening_discounts_what_every_example_shares_and_how_a_nodes_examples_vary() -> None:
    """Axis 0 is shared by every example (e5's common direction); on axis 1 the nodes differ a lot, but so do each
    node's own examples (wording, language); on axis 2 they differ a little, and their examples agree. A question
    a little towards a on axis 1 and clearly towards b on axis 2 is b's: plain cosines say a, whitened ones b."""
    from agents_app.runtime.intents import RouterConfig

    emb = _Vectors({"a1": [1, 1.0, 0.0], "a2": [1, 0.2, 0.0], "b1": [1, -0.2, 0.2], "b2": [1, -1.0, 0.2],
                    "q": [1, 0.1, 0.25]})
    specs = [IntentSpec(code="a", name="A", kind="MCP", path=("d", "a"), examples=("a1", "a2")),
             IntentSpec(code="b", name="B", kind="MCP", path=("d", "b"), examples=("b1", "b2"))]
    plain = IntentIndex(specs, emb, RouterConfig(whiten_shrinkage=0.0, domain_weight=0.0, plain_weight=0.0))
    whitened = IntentIndex(specs, emb, RouterConfig(whiten_shrinkage=0.1, domain_weight=0.0, plain_weight=0.0))
    assert plain.semantic_scores(emb.embed(["q"])[0]).argmax() == 0
    assert whitened.semantic_scores(emb.embed(["q"])[0]).argmax() == 1
    assert [m.code for m in whitened.route("q", top_k=2)][0] == "b"
    # plain_weight mixes the plain cosine back in: (whitened + k * plain) / (1 + k).
    q = emb.embed(["q"])[0]
    mixed = IntentIndex(specs, emb, RouterConfig(whiten_shrinkage=0.1, domain_weight=0.0, plain_weight=2.0))
    want = (whitened.semantic_scores(q) + 2.0 * plain.semantic_scores(q)) / 3.0
    assert np.allclose(mixed.semantic_scores(q), want, atol=1e-5)


def test_domain_prior_prefers_the_domain_the_question_is_about() -> None:
    """Two nodes equally close to the question; the one whose domain (its siblings) is about the question wins.
    A node alone in its domain gets the mean of the other domains' scores, not its own."""
    from agents_app.runtime.intents import RouterConfig

    emb = _Vectors({"x": [1, 1, 0, 0, 0], "y": [1, 0, 1, 0, 0], "shop2": [0, 0.2, 0, 1, 0], "fac2": [0, 0, 0.2, 0, 1],
                    "solo": [0, 0.2, 0.2, 0.5, 0.5], "q": [0.8, 0.5, 0.5, 0.3, 0]})
    specs = [IntentSpec(code="x", name="X", kind="MCP", path=("shop", "x"), examples=("x",)),
             IntentSpec(code="y", name="Y", kind="MCP", path=("fac", "y"), examples=("y",)),
             IntentSpec(code="s2", name="S", kind="MCP", path=("shop", "s2"), examples=("shop2",)),
             IntentSpec(code="f2", name="F", kind="MCP", path=("fac", "f2"), examples=("fac2",)),
             IntentSpec(code="solo", name="Solo", kind="MCP", path=("solo",), examples=("solo",))]
    q = emb.embed(["q"])[0]
    flat = IntentIndex(specs, emb, RouterConfig(whiten_shrinkage=0.0, domain_weight=0.0, plain_weight=0.0)).semantic_scores(q)
    assert abs(flat[0] - flat[1]) < 1e-6
    tree = IntentIndex(specs, emb, RouterConfig(whiten_shrinkage=0.0, domain_weight=0.5, plain_weight=0.0))
    scores = tree.semantic_scores(q)
    assert scores[0] > scores[1]
    # Each shared domain's own score, recovered from a member; the solo node gets their mean, not its own score.
    shop, fac = (1.5 * scores[0] - flat[0]) / 0.5, (1.5 * scores[1] - flat[1]) / 0.5
    assert abs(scores[4] - (flat[4] + 0.5 * (shop + fac) / 2) / 1.5) < 1e-5


def test_the_second_model_breaks_a_tie_the_first_cannot_and_weighs_nothing_at_zero() -> None:
    """The main model puts the question exactly between two nodes; the second model's part points at b. Its
    opinion decides with `second_weight` > 0, and a router that turns it off sees the tie (first node first)."""
    from agents_app.runtime.intents import RouterConfig

    class Two:
        model, dim, second_dim = "two", 2, 2
        main = {"a1": [1.0, 0.0], "b1": [0.0, 1.0], "q": [0.7071, 0.7071]}
        second = {"a1": [1.0, 0.1], "b1": [0.1, 1.0], "q": [0.2, 1.0]}

        def embed(self, texts: Sequence[str]) -> np.ndarray:
            return np.asarray([self.main[t] + self.second[t] for t in texts], dtype=np.float32)

        def embed_examples(self, texts: Sequence[str]) -> np.ndarray:
            return np.asarray([self.main[t] * 2 + self.second[t] for t in texts], dtype=np.float32)

    specs = [IntentSpec(code="a", name="A", kind="MCP", path=("a",), examples=("a1",)),
             IntentSpec(code="b", name="B", kind="MCP", path=("b",), examples=("b1",))]
    plain: dict[str, Any] = {"whiten_shrinkage": 0.0, "domain_weight": 0.0, "plain_weight": 0.0}
    off = IntentIndex(specs, Two(), RouterConfig(second_weight=0.0, **plain))
    on = IntentIndex(specs, Two(), RouterConfig(second_weight=0.2, **plain))
    question = Two().embed(["q"])[0]
    tie = off.semantic_scores(question)
    assert abs(float(tie[0] - tie[1])) < 1e-4
    scores = on.semantic_scores(question)
    assert scores.argmax() == 1 and float(scores[1] - scores[0]) > 0.1
    assert [m.code for m in on.route("q", top_k=2)] == ["b", "a"]


def test_a_forked_child_embeds_after_its_parent_did() -> None:
    """Celery's prefork pool and a preloading web server fork a process whose embedder has run: the child gets
    the executor object but not its thread, and must not wait on it forever."""
    import os
    import signal

    from agents_app.runtime.intents.embedder import QUESTION_DIM
    from tests.waiting import wait_until

    emb = _embedder(cache_size=0)
    parent = emb.embed(["will it rain tomorrow"])
    pid = os.fork()
    if pid == 0:  # the child: exit 0 only with the same vector as the parent's
        code = 1
        try:
            child = emb.embed(["will it rain tomorrow"])
            code = 0 if child.shape == (1, QUESTION_DIM) and np.allclose(child, parent, atol=1e-5) else 1
        finally:
            os._exit(code)
    exited: list[int] = []

    def reaped() -> bool:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            exited.append(os.waitstatus_to_exitcode(status))
        return bool(done)

    if not wait_until(reaped, scaled(60)):
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        raise AssertionError("the forked child's embed() hung")
    assert exited == [0]


def test_tool_search_routes_on_the_second_model_alone_and_credits_the_matched_functions() -> None:
    from agents_app.runtime.function_search import FunctionDoc, build_index, search

    index, embedder = _index(), default_embedder()
    svec = embedder.embed_second(["上海明天会下雨吗"])[0]
    assert index.route_second("上海明天会下雨吗", svec)[0].code == "weather"
    assert index.route_second("华南地区还有哪些工单没处理",
                              embedder.embed_second(["华南地区还有哪些工单没处理"])[0])[0].code == "tickets"
    # Two functions whose own words say nothing of the question: the router's labelled examples decide.
    docs = [FunctionDoc("w__q", "Query", "Runs a query."), FunctionDoc("t__q", "Query", "Runs a query.")]
    functions = build_index(docs, embedder.embed_second)
    hits = search(functions, "上海明天会下雨吗", embedder=embedder, router=index)
    assert [h.name for h in hits] == ["w__q", "t__q"] and hits[0].score > hits[1].score
    plain = {h.name: h.score for h in search(functions, "上海明天会下雨吗", embedder=embedder)}
    assert abs(plain["w__q"] - plain["t__q"]) < 0.1 < hits[0].score - plain["w__q"]  # the route's credit decides
