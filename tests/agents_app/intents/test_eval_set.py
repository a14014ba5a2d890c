"""The labelled evaluation set itself: big enough, three splits, and no text shared between them."""

from __future__ import annotations

from tests.fixtures.intents import load_dev, load_heldout, load_tree


def test_tree_has_40_topics_across_3_domains_with_5_training_examples_each() -> None:
    tree = load_tree()
    topics = [n for n in tree if n.get("level") == "TOPIC"]
    domains = {n["code"] for n in tree if n.get("level") == "DOMAIN"}
    assert len(topics) >= 40 and len(domains) >= 3
    assert all(len(n.get("examples", [])) >= 5 for n in topics)
    assert {n["kind"] for n in topics} == {"MCP", "KB", "KB_AND_MCP", "SYSTEM"}


def test_dev_and_heldout_cover_every_topic_in_both_languages_and_share_no_text() -> None:
    topics = {n["code"] for n in load_tree() if n.get("level") == "TOPIC"}
    training = {e.strip().lower() for n in load_tree() for e in n.get("examples", [])}
    splits = {"dev": load_dev(), "heldout": load_heldout()}
    texts: dict[str, set[str]] = {}
    for name, split in splits.items():
        assert set(split) == topics, name
        assert all(len(v["en"]) >= 2 and len(v["zh"]) >= 2 for v in split.values()), name
        texts[name] = {q.strip().lower() for v in split.values() for qs in v.values() for q in qs}
        assert not texts[name] & training, f"{name} repeats a training example"
    assert not texts["dev"] & texts["heldout"]
