"""Lexical features: lower-cased Latin words (light stemming) and CJK character unigrams and bigrams.

Chinese has no spaces, so words are approximated by overlapping characters; bigrams carry most of the
meaning ("天气", "工单"), unigrams keep recall for one-character words ("书", "票").
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

import numpy as np

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


class Bm25:
    """Okapi BM25 of a question's features against one document per node, scaled to 0..1.

    A score is divided by what a document holding every term of the question (at saturation) would get, so
    it reads like the lexical channel's share of the fused score; terms no document has still count in that
    ceiling (at the idf of a term in no document), so a question mostly about something else scores low.
    """

    def __init__(self, docs: Sequence[Counter[str]], *, k1: float = 1.2, b: float = 0.75) -> None:
        self.n = n = len(docs)
        self.k1 = k1
        df: Counter[str] = Counter(t for d in docs for t in d)
        self.idf = {t: math.log(1.0 + (n - c + 0.5) / (c + 0.5)) for t, c in df.items()}
        self.unseen_idf = math.log(1.0 + n)
        lengths = [sum(d.values()) for d in docs]
        avg = (sum(lengths) / n) if n else 1.0
        postings: dict[str, tuple[list[int], list[float]]] = {}
        for i, d in enumerate(docs):
            norm = k1 * (1.0 - b + b * lengths[i] / (avg or 1.0))
            for t, c in d.items():
                rows, ws = postings.setdefault(t, ([], []))
                rows.append(i)
                ws.append(self.idf[t] * c * (k1 + 1.0) / (c + norm))
        self.postings = {t: (np.asarray(r, dtype=np.int64), np.asarray(w, dtype=np.float32))
                         for t, (r, w) in postings.items()}

    def scores(self, bag: Counter[str]) -> np.ndarray:
        if not bag or not self.n:
            return np.zeros(self.n, dtype=np.float32)
        ceiling = sum(self.idf.get(t, self.unseen_idf) for t in bag) * (self.k1 + 1.0)
        known = [t for t in bag if t in self.postings]
        if not known:
            return np.zeros(self.n, dtype=np.float32)
        rows = np.concatenate([self.postings[t][0] for t in known])
        ws = np.concatenate([self.postings[t][1] for t in known])
        return (np.bincount(rows, weights=ws, minlength=self.n) / ceiling).astype(np.float32)
