"""Lexical features: lower-cased Latin words (light stemming) and CJK character unigrams and bigrams.

Chinese has no spaces, so words are approximated by overlapping characters; bigrams carry most of the
meaning ("天气", "工单"), unigrams keep recall for one-character words ("书", "票").
"""

from __future__ import annotations

import re
from collections import Counter

_CJK = r"\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_TOKEN = re.compile(rf"[{_CJK}]+|[a-z0-9]+(?:['’][a-z]+)?")
_IS_CJK = re.compile(rf"[{_CJK}]")
# Function words that say nothing about which tool a question needs.
STOPWORDS = frozenset(
    "a an the is are was were be been am do does did i me my we our you your it its this that these those "
    "to of in on at for from by with and or please can could would should will what which who whom how "
    "when where why there here any some me us them they he she his her have has had get got want need "
    "tell show give let know about into up out all just".split()
)
CJK_STOP = frozenset("的了吗呢吧啊是我你他她它们请帮一下个有在和与及把被给要想能么什怎")


def _stem(word: str) -> str:
    for suffix, keep in (("ies", "y"), ("ing", ""), ("ed", ""), ("es", ""), ("s", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)] + keep
    return word


def features(text: str) -> Counter[str]:
    """The bag of lexical features of a text (term counts)."""
    out: Counter[str] = Counter()
    for token in _TOKEN.findall(text.lower()):
        if _IS_CJK.match(token):
            chars = [c for c in token]
            for c in chars:
                if c not in CJK_STOP:
                    out["c:" + c] += 1
            for a, b in zip(chars, chars[1:], strict=False):
                out["b:" + a + b] += 1
        elif token not in STOPWORDS:
            out["w:" + _stem(token.replace("’", "'").split("'")[0])] += 1
    return out
