"""The scrubber against secrets an upstream takes apart: the token of a `Bearer <token>` value on its own, and a
secret split across fields that are not neighbours in one array (nested objects, content items, separated by
other values)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from core.secrets import MASK, Scrubber, redact, scrub, scrub_text, secret_parts

TOKEN = "tok-7fQ2xLm9Rv41Zb"
PERSONAL = f"Bearer {TOKEN}"
SECRET = "sk-Live_9fQ2<&>x"


def test_the_token_of_an_authorization_value_is_a_secret_of_its_own() -> None:
    assert secret_parts(PERSONAL) == [PERSONAL, TOKEN]
    assert secret_parts("Basic dXNlcjpwYXNzd29yZA==") == ["Basic dXNlcjpwYXNzd29yZA==", "dXNlcjpwYXNzd29yZA=="]
    assert secret_parts("token ghp_Ab12Cd34") == ["token ghp_Ab12Cd34", "ghp_Ab12Cd34"]
    # An ordinary pass phrase is not taken apart: none of its words becomes a secret of its own.
    assert secret_parts("my pass word") == ["my pass word"]
    assert secret_parts("Bearer x") == ["Bearer x"]  # too short to mask on its own
    assert scrub_text(f"upstream saw {TOKEN}.", [PERSONAL]) == f"upstream saw {MASK}."
    assert TOKEN not in json.dumps(scrub({"echo": TOKEN, "header": PERSONAL}, [PERSONAL]))
    assert TOKEN not in json.dumps(redact({"q": f"x{TOKEN}x"}, [PERSONAL]))
    # Its encoded forms too (the scrubber's usual ones): percent-encoded, JSON-escaped twice.
    assert TOKEN not in scrub_text("a=" + TOKEN.replace("-", "%2D"), [PERSONAL]).replace("%2D", "-")


@pytest.mark.parametrize("answer,leaks", [
    ({"first": "sk-Live_", "count": 3, "second": "9fQ2<&>x"}, ["9fQ2<&>x"]),
    ({"a": {"x": "sk-Li"}, "b": [{"y": "ve_9fQ2<&>x"}]}, ["ve_9fQ2<&>x"]),
    ([{"type": "text", "text": "key: sk-Live"}, {"type": "text", "text": "_9fQ2<&>x, ok"}], ["_9fQ2<&>x"]),
    (["sk", "-Li", "ve_", "9fQ", "2<&>x"], ["ve_", "9fQ", "2<&>x"]),
    ({"a": "sk-Live_", "b": "9fQ2\\u003c&>x"}, ["9fQ2\\u003c&>x"]),  # the second half JSON-escaped
])
def test_a_secret_split_across_fields_is_masked(answer: Any, leaks: list[str]) -> None:
    out = scrub(answer, [SECRET])
    dumped = json.dumps(out, ensure_ascii=False)
    assert MASK in dumped
    for leak in leaks:
        assert leak not in dumped, dumped
    assert "".join(_strings(out)).find("9fQ2") < 0


def test_text_around_a_split_secret_is_kept_and_unrelated_values_untouched() -> None:
    out = scrub([{"type": "text", "text": "key: sk-Live"}, {"type": "text", "text": "_9fQ2<&>x, ok"}], [SECRET])
    assert out == [{"type": "text", "text": "key: " + MASK}, {"type": "text", "text": MASK + ", ok"}]
    unrelated: dict[str, Any] = {"a": "sk-", "b": "Live", "n": [1, "2"], "user": "alice"}
    assert scrub(unrelated, [SECRET]) == unrelated
    # Base64 next to another field is not swallowed with it: the run is masked, its neighbour kept.
    import base64

    blob = base64.b64encode(SECRET.encode()).decode()
    assert scrub({"user": "alice", "auth": blob}, [SECRET]) == {"user": "alice", "auth": MASK}


def test_nothing_to_do_without_secrets() -> None:
    value = {"a": ["b", {"c": "d"}]}
    assert Scrubber([]).value(value) is value


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def test_a_split_inside_json_text_is_caught_too() -> None:
    """A tool's structured answer as text (the SDK sends a dict's JSON as the text content): its fields too."""
    text = json.dumps({"first": "sk-Live_", "n": 1, "second": "9fQ2<&>x"})
    out = scrub([{"type": "text", "text": text}], [SECRET])
    assert json.loads(out[0]["text"]) == {"first": MASK, "n": 1, "second": MASK}
    plain = json.dumps({"first": "sk-", "second": "Live"})
    assert scrub([{"type": "text", "text": plain}], [SECRET]) == [{"type": "text", "text": plain}]
