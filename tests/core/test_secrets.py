"""The one scrubber, the masked merge and the origin rule: pure functions, no database."""

from __future__ import annotations

import base64
import io
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

import pytest

from core.errors import ValidationFailed
from core.secrets import (
    MASK,
    SecretLogFilter,
    SecretsRequired,
    StreamScrubber,
    kept_keys,
    merge_masked,
    origin,
    redact,
    require_secrets_on_move,
    scrub,
    scrub_text,
    scrubber,
)

SECRET = 'sk-Te st/"pa+ss=9é'


def unicode_escaped(s: str) -> str:
    return "".join(f"\\u{ord(c):04x}" for c in s)


def b64(data: bytes, urlsafe: bool = False, pad: bool = True) -> str:
    text = (base64.urlsafe_b64encode if urlsafe else base64.b64encode)(data).decode()
    return text if pad else text.rstrip("=")


ENCODINGS: list[tuple[str, Callable[[str], str]]] = [
    ("raw", lambda s: s),
    ("json", lambda s: json.dumps(s)[1:-1]),
    ("json-unicode", lambda s: json.dumps(s, ensure_ascii=False)[1:-1]),
    ("json-twice", lambda s: json.dumps(json.dumps(s))[1:-1]),
    ("unicode-escaped", unicode_escaped),
    ("unicode-escaped-upper", lambda s: unicode_escaped(s).upper().replace("\\U", "\\u")),
    ("quote", quote),
    ("quote-nosafe", lambda s: quote(s, safe="")),
    ("quote-plus", quote_plus),
    ("quote-lower-hex", lambda s: quote(s, safe="").replace("%2F", "%2f").replace("%C3%A9", "%c3%a9")),
    ("b64", lambda s: b64(s.encode())),
    ("b64-nopad", lambda s: b64(s.encode(), pad=False)),
    ("b64-urlsafe", lambda s: b64(s.encode(), urlsafe=True)),
    ("b64-urlsafe-nopad", lambda s: b64(s.encode(), urlsafe=True, pad=False)),
    ("basic-auth", lambda s: "Basic " + b64(b"alice:" + s.encode())),
    ("basic-auth-1", lambda s: "Basic " + b64(b"al:" + s.encode())),
    ("basic-auth-2", lambda s: "Basic " + b64(b"bob:" + s.encode())),
    ("b64-inside-blob", lambda s: b64(b'{"user":"x","token":"' + s.encode() + b'","more":"data"}')),
]


@pytest.mark.parametrize("encode", [e for _, e in ENCODINGS], ids=[n for n, _ in ENCODINGS])
def test_every_encoded_form_is_masked(encode: Callable[[str], str]) -> None:
    form = encode(SECRET)
    text = f"before {form} after"
    out = scrub_text(text, [SECRET])
    assert form not in out
    assert MASK in out and out.startswith("before ") and out.endswith(" after")


def test_whole_base64_run_goes_not_just_its_middle() -> None:
    token = b64(b"alice:" + SECRET.encode())
    assert scrub_text(f"Authorization: Basic {token}\n", [SECRET]) == f"Authorization: Basic {MASK}\n"


def test_ordinary_text_and_short_values_are_left_alone() -> None:
    text = "nothing secret here, abc, base64 aGVsbG8gd29ybGQ="
    assert scrub_text(text, ["zz-not-present-zz", "ab"]) == text
    assert scrub_text("ab ab", ["ab"]) == "ab ab"  # too short to mask without shredding text


def test_json_values_keys_and_nesting() -> None:
    value = {"env": {"KEY": SECRET}, SECRET: [1, {"x": f"Bearer {SECRET}"}], "n": 3}
    out = scrub(value, [SECRET])
    assert SECRET not in json.dumps(out, ensure_ascii=False)
    assert out["n"] == 3 and out["env"] == {"KEY": MASK}


def test_redact_masks_secret_looking_keys_and_values() -> None:
    out = redact({"password": "hunter22", "q": f"x{SECRET}y", "list": [SECRET]}, [SECRET])
    assert out == {"password": MASK, "q": f"x{MASK}y", "list": [MASK]}


def test_scrub_before_cut_leaves_no_prefix() -> None:
    text = "x" * 10 + SECRET + "tail"
    # The rule for every caller: scrub the whole text, then cut.
    assert SECRET[:5] not in scrub_text(text, [SECRET])[:14]


def test_stream_scrubber_catches_a_secret_split_across_pieces() -> None:
    stream = StreamScrubber(scrubber([SECRET]))
    message = f"my key is {SECRET}, and {json.dumps(SECRET)[1:-1]} escaped. " * 3
    shown = "".join(stream.feed(ch) for ch in message) + stream.flush()
    assert SECRET not in shown and json.dumps(SECRET)[1:-1] not in shown
    assert shown.count(MASK) == 6 and shown.startswith("my key is ")


def test_stream_scrubber_without_secrets_passes_through() -> None:
    stream = StreamScrubber(scrubber([]))
    assert stream.feed("hello") == "hello" and stream.flush() == ""


def test_log_filter_masks_known_secrets_in_message_args_and_traceback() -> None:
    scrubber([SECRET])  # the process now handles this secret
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(SecretLogFilter())
    handler.setFormatter(logging.Formatter("%(message)s"))
    log = logging.getLogger("tests.core.secrets")
    log.addHandler(handler)
    log.propagate = False
    try:
        log.warning("calling with %s", quote(SECRET, safe=""))
        try:
            raise RuntimeError(f"boom {SECRET}")
        except RuntimeError:
            log.exception("failed")
    finally:
        log.removeHandler(handler)
        log.propagate = True
    out = stream.getvalue()
    assert SECRET not in out and quote(SECRET, safe="") not in out
    assert out.count(MASK) == 2 and "RuntimeError" in out


def test_merge_masked_keeps_stored_values_and_names_a_missing_key() -> None:
    stored = {"env": {"A": "old-a", "B": "old-b"}}
    merged = merge_masked(stored=stored, incoming={"env": {"A": MASK, "C": "new"}}, secret_maps=("env",))
    assert merged == {"env": {"A": "old-a", "C": "new"}}
    with pytest.raises(ValidationFailed) as exc:
        merge_masked(stored=stored, incoming={"env": {"Z": MASK}}, secret_maps=("env",))
    assert exc.value.details == {"field": "config.env.Z"} and "old-" not in exc.value.message


def test_kept_keys_lists_masked_keys_with_a_stored_value() -> None:
    stored = {"headers": {"Authorization": "Bearer t", "Empty": ""}}
    incoming = {"headers": {"Authorization": MASK, "Empty": MASK, "X": "1"}}
    assert kept_keys(stored=stored, incoming=incoming, secret_maps=("headers",)) == ["headers.Authorization"]


@pytest.mark.parametrize(
    ("old", "new", "moved"),
    [
        ("http://a.example/x", "http://a.example/y?q=1", False),
        ("https://a.example/x", "https://A.EXAMPLE:443/z", False),
        ("http://a.example/x", "https://a.example/x", True),
        ("http://a.example/x", "http://b.example/x", True),
        ("http://a.example:8080/x", "http://a.example:8081/x", True),
        ("http://127.0.0.1:1/", "http://[::1]:1/", True),
    ],
)
def test_origin_rule(old: str, new: str, moved: bool) -> None:
    assert (origin(old) != origin(new)) is moved
    if moved:
        with pytest.raises(SecretsRequired) as exc:
            require_secrets_on_move(old_url=old, new_url=new, kept=["headers.Authorization"], field="config.url")
        assert exc.value.code == "secrets_required"
        assert exc.value.details["secrets_required"] == ["headers.Authorization"]
    require_secrets_on_move(old_url=old, new_url=new, kept=[], field="config.url")  # nothing kept: fine


def test_log_filter_scrubs_every_field_of_the_record_not_only_the_message() -> None:
    """A structured `extra` (Celery's task log passes `data` as a dict), a non-string extra, args of any
    type and stack_info are printed by formatters and JSON handlers: the secret is masked in each."""
    scrubber([SECRET])
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(SecretLogFilter())
    handler.setFormatter(logging.Formatter("%(message)s | %(data)s | %(other)s | %(note)s"))
    log = logging.getLogger("tests.core.secrets.structured")
    log.addHandler(handler)
    log.propagate = False
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    keep = Keep()
    keep.addFilter(SecretLogFilter())
    log.addHandler(keep)
    try:
        log.info(
            "Task %(name)s succeeded: %(result)s",
            {"name": "t", "result": {"token": SECRET}},
            extra={"data": {"id": "1", "args": [SECRET], "kwargs": {"k": SECRET}},
                   "other": (SECRET, 3), "note": SECRET},
            stack_info=True,
        )
        log.warning("tuple args %s %r", 1, [SECRET], extra={"data": 1, "other": 2, "note": 3})
    finally:
        log.removeHandler(handler)
        log.removeHandler(keep)
        log.propagate = True
    out = stream.getvalue()
    assert SECRET not in out and repr(SECRET)[1:-1] not in out
    assert MASK in out and "succeeded" in out
    for record in records:
        for value in vars(record).values():
            assert SECRET not in str(value)
    assert records[0].data["id"] == "1"  # type: ignore[attr-defined]  # structure kept, only values masked


CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "scrub_corpus" / "cases.jsonl"
CORPUS_CASES = [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.mark.parametrize("case", CORPUS_CASES, ids=[f"{c['encoding']}-{i}" for i, c in enumerate(CORPUS_CASES)])
def test_scrubber_corpus(case: dict[str, Any]) -> None:
    """One row per encoding an upstream was seen to echo (and per false positive to avoid): the corpus grows
    with each new encoding found."""
    out = scrub(case["input"], [case["secret"]])
    if case["masked"]:
        dumped = json.dumps(out, ensure_ascii=False)
        assert MASK in dumped
        for leak in case["leaks"]:
            assert leak not in dumped
    else:
        assert out == case["input"]
