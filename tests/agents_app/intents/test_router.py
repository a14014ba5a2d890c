"""The Django-free router: lexical features for Chinese, fusion, eligibility and the turn policy."""

from __future__ import annotations

from agents_app.runtime.intents import IntentIndex, IntentSpec, default_embedder, features
from agents_app.runtime.intents.policy import decide
from agents_app.runtime.intents.router import Match


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
