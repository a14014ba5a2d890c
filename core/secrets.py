"""The secret rules, in one place: MASK, the KEEP sentinel, the masked merge, the origin rule and the one scrubber.

Django-free (an import-linter contract checks it): the runtimes, services and the logging filter all use it.
"""

from __future__ import annotations

import base64
import bisect
import copy
import functools
import html.entities
import json
import logging
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from core.codes import ApiCode
from core.errors import DomainError, ValidationFailed
from core.urls import origin as origin  # re-exported: one origin rule, kept in core.urls

MASK = "********"
# The config key listing secret-map entries (as `map.key`) whose values are not secret.
NOT_SECRET = "not_secret"
# Shorter values would shred ordinary text; such "secrets" are not scrubbed.
MIN_SECRET_CHARS = 4
# Base64 of a secret at an unknown offset inside a longer blob is matched by its stable middle; that middle
# must be long enough not to match ordinary base64 by chance.
MIN_B64_CORE_CHARS = 6
SECRET_KEY_RE = re.compile(
    r"(pass(word|wd)?|secret|token|api[-_]?key|auth(orization)?|credential|private[-_]?key)", re.I
)


class _Keep:
    """Sentinel: leave the stored value as it is (an omitted field, or a config sent as "")."""

    def __repr__(self) -> str:
        return "KEEP"


KEEP: Any = _Keep()


class SecretsRequired(ValidationFailed):
    """A destination moved to another origin while secrets were kept: they must be sent again."""

    code = ApiCode.SECRETS_REQUIRED


# --- masked maps ------------------------------------------------------------------------------------------


def plain_keys(config: Mapping[str, Any] | None) -> frozenset[str]:
    """Keys (as `map.key`) of secret maps that the config marks not secret (`"not_secret": ["env.CURRENCY"]`):
    their values are shown and edited like any other field, and never kept by the mask."""
    listed = (config or {}).get(NOT_SECRET)
    return frozenset(k for k in listed if isinstance(k, str)) if isinstance(listed, list | tuple) else frozenset()


def masked_keys(config: Mapping[str, Any] | None, secret_maps: Iterable[str]) -> list[str]:
    """Keys (as `map.key`) whose value is the mask placeholder."""
    found: list[str] = []
    for map_name in secret_maps:
        section = (config or {}).get(map_name)
        if isinstance(section, Mapping):
            found += [f"{map_name}.{k}" for k, v in section.items() if v == MASK]
    return found


def merge_masked(
    *,
    stored: Mapping[str, Any] | None,
    incoming: Mapping[str, Any],
    secret_maps: Iterable[str],
    prefix: str = "config",
    error: type[DomainError] = ValidationFailed,
) -> dict[str, Any]:
    """A copy of `incoming` where a `"********"` value in a secret map keeps the stored value under that key.

    A mask with nothing stored under its key raises `error` naming the field, never a value.
    """
    merged = copy.deepcopy(dict(incoming))
    stored = stored or {}
    plain = plain_keys(incoming)
    for map_name in secret_maps:
        section = merged.get(map_name)
        if not isinstance(section, dict):
            continue
        old = stored.get(map_name) or {}
        for key, value in section.items():
            if value == MASK:
                field = f"{prefix}.{map_name}.{key}" if prefix else f"{map_name}.{key}"
                if f"{map_name}.{key}" in plain:
                    # Marking a stored secret "not secret" must not reveal it: its value is sent again.
                    raise error(
                        f"{field} is marked not secret ({NOT_SECRET}) but sent as {MASK!r}; send its value",
                        details={"field": field},
                    )
                if key not in old:
                    raise error(
                        f"{field} is {MASK!r} but no value is stored under that key; send the real value",
                        details={"field": field},
                    )
                section[key] = old[key]
    return merged


def kept_keys(
    *, stored: Mapping[str, Any] | None, incoming: Mapping[str, Any], secret_maps: Iterable[str]
) -> list[str]:
    """Secret keys (as `map.key`) whose stored, non-empty value `incoming` keeps by sending the mask."""
    kept: list[str] = []
    plain = plain_keys(incoming)
    for name in masked_keys(incoming, secret_maps):
        if name in plain:
            continue
        map_name, key = name.split(".", 1)
        if ((stored or {}).get(map_name) or {}).get(key):
            kept.append(name)
    return kept


def mask_maps(config: Mapping[str, Any] | None, secret_maps: Iterable[str]) -> dict[str, Any]:
    """The config's structure with every secret-map value replaced by the mask (but those marked not secret)."""
    if not config:
        return {}
    masked = copy.deepcopy(dict(config))
    plain = plain_keys(config)
    for map_name in secret_maps:
        section = masked.get(map_name)
        if isinstance(section, Mapping):
            masked[map_name] = {k: v if f"{map_name}.{k}" in plain else MASK for k, v in section.items()}
    return masked


def secret_values(config: Mapping[str, Any] | None, secret_maps: Iterable[str]) -> list[str]:
    """Every secret value in a config's secret maps (what the scrubber must mask)."""
    values: list[str] = []
    plain = plain_keys(config)
    for map_name in secret_maps:
        section = (config or {}).get(map_name)
        if isinstance(section, Mapping):
            values += [v for k, v in section.items()
                       if isinstance(v, str) and len(v) >= MIN_SECRET_CHARS and f"{map_name}.{k}" not in plain]
    return values


# --- the origin rule --------------------------------------------------------------------------------------

# `origin` lives in core.urls (the same rule the outbound guard applies to redirects).


def require_secrets_on_move(*, old_url: str | None, new_url: str | None, kept: Iterable[str], field: str) -> None:
    """Refuse to send kept secrets to another origin: a move of `field` needs `kept` to be supplied again.

    `kept` names the secret keys the change keeps by `"********"` or by omission.
    """
    kept = sorted(set(kept))
    if not kept or not old_url or not new_url or origin(old_url) == origin(new_url):
        return
    raise SecretsRequired(
        f"{field} moves to another origin (scheme, host or port); the stored secrets are not sent to a new "
        f"destination: supply {', '.join(kept)} again (\"{MASK}\" or omission keeps them only on the same origin)",
        details={"field": field, "secrets_required": kept},
    )


# --- the one scrubber -------------------------------------------------------------------------------------

_JSON_SHORT = {'"': '\\"', "\\": "\\\\", "/": "\\/", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_B64_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/-_")
_TO_URLSAFE = str.maketrans("+/", "-_")
_PARTIAL_ESCAPE = re.compile(r"(?:\\+(?:u[0-9a-fA-F]{0,3})?|%[0-9a-fA-F]?)\Z")


def _hex(text: str) -> str:
    """A regex matching hex digits of `text` in either case."""
    return "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else c for c in text)


def _char_pattern(c: str) -> str:
    """One character of a secret as it may appear raw, JSON-escaped, \\u-escaped or percent-encoded."""
    cp = ord(c)
    units = [cp] if cp <= 0xFFFF else [0xD800 + ((cp - 0x10000) >> 10), 0xDC00 + ((cp - 0x10000) & 0x3FF)]
    once = {c, "".join(f"\\u{u:04x}" for u in units), _JSON_SHORT.get(c, c)}
    # JSON text inside a JSON string (a result's `text` that is itself serialised JSON) is escaped again.
    twice = {json.dumps(e)[1:-1] for e in once}
    alternatives = {_hex(re.escape(e)) if "\\u" in e else re.escape(e) for e in once | twice}
    alternatives.add("".join("%" + _hex(f"{b:02x}") for b in c.encode("utf-8")))
    if c == " ":
        alternatives.add(r"\+")  # quote_plus
    # HTML character references an upstream's HTML page echoes: decimal, hex (either case), named.
    alternatives.add(f"&#0*{cp};")
    alternatives.add("&#[xX]0*" + _hex(f"{cp:x}") + ";")
    if cp in html.entities.codepoint2name:
        alternatives.add(f"&{html.entities.codepoint2name[cp]};")
    return "(?:" + "|".join(sorted(alternatives, key=len, reverse=True)) + ")"


def _prefix_pattern(chars: list[str]) -> str:
    """A regex for any non-empty prefix of the sequence of character patterns `chars`."""
    rest = ""
    for p in reversed(chars[1:]):
        rest = f"(?:{p}{rest})?"
    return chars[0] + rest


COMBINE_UP_TO = 24


@functools.lru_cache(maxsize=4096)
def _matcher(value: str) -> tuple[re.Pattern[str], tuple[str, ...]]:
    """One secret's form pattern and base64 cores."""
    return _combined((value,))


@functools.lru_cache(maxsize=256)
def _combined(values: tuple[str, ...]) -> tuple[re.Pattern[str], tuple[str, ...]]:
    """The form pattern of several secrets (longest first) behind a one-class lookahead, so ordinary text
    fails fast at most positions; and their base64 cores."""
    starts = {v[0] for v in values} | {"\\", "%", "&"} | ({"+"} if any(v[0] == " " for v in values) else set())
    lead = "(?=[" + "".join(re.escape(c) for c in sorted(starts)) + "])"
    forms = re.compile(lead + "(?:" + "|".join("".join(_char_pattern(c) for c in v) for v in values) + ")")
    cores = set().union(*(_b64_cores(v.encode("utf-8")) for v in values))
    return forms, tuple(sorted(cores, key=len, reverse=True))


@functools.lru_cache(maxsize=1024)
def _prefix(value: str) -> re.Pattern[str]:
    """Text ending in a non-empty beginning of one of the secret's forms."""
    return re.compile(_prefix_pattern([_char_pattern(c) for c in value]) + r"\Z")


def _b64_cores(secret: bytes) -> set[str]:
    """Base64 text that any base64 blob containing `secret` contains, std and urlsafe alphabets.

    For each of the three byte offsets modulo 3, the characters encoding only the secret's bits; plus the
    whole encoding of the secret alone (so short secrets sent as a token are caught too).
    """
    alone = base64.b64encode(secret).decode().rstrip("=")
    cores = {alone} if len(alone) >= 6 else set()
    n = len(secret)
    for k in range(3):
        encoded = base64.b64encode(b"\0" * k + secret).decode().rstrip("=")
        first, last = -(-8 * k // 6), (8 * (k + n)) // 6  # chars whose 6 bits all lie inside the secret
        core = encoded[first:last]
        if len(core) >= MIN_B64_CORE_CHARS:
            cores.add(core)
    return cores | {c.translate(_TO_URLSAFE) for c in cores}


@functools.lru_cache(maxsize=1024)
def _transformed(values: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """Whole-value transforms an upstream applies before echoing a secret, lower-cased for a case-blind
    search: the secret in another case, hex of its UTF-8 bytes and base32 (either case, padded or not)."""
    forms: set[tuple[str, str]] = set()  # (form, the padding character that may follow it)
    for value in values:
        raw = value.encode("utf-8")
        forms |= {(value.lower(), ""), (raw.hex(), ""), (base64.b32encode(raw).decode().rstrip("=").lower(), "=")}
    return tuple(sorted(forms, key=lambda f: len(f[0]), reverse=True))


# HTTP authentication schemes whose credential is a secret of its own (RFC 9110 §11: `<scheme> <credentials>`).
AUTH_SCHEMES = frozenset({"bearer", "basic", "token", "bot", "dpop", "digest", "apikey", "api-key", "key",
                          "negotiate", "ntlm", "ssws", "mac", "pat", "oauth", "sso-key"})
_AUTH_VALUE = re.compile(r"([A-Za-z][A-Za-z0-9._-]{0,19})[ \t]+(\S+)")
# A credential after an unknown scheme word is taken apart only when it is long enough to be no ordinary word.
MIN_UNKNOWN_SCHEME_CREDENTIAL = 16


def secret_parts(value: str) -> list[str]:
    """A secret and the parts an upstream may echo on their own: for an authorization value such as
    `Bearer <token>` (a personal key as the README shows it, a static `Authorization` header), its credential.
    An ordinary phrase is not taken apart."""
    found = _AUTH_VALUE.fullmatch(value.strip())
    if not found:
        return [value]
    scheme, credential = found.group(1), found.group(2)
    known = scheme.lower() in AUTH_SCHEMES
    if len(credential) < MIN_SECRET_CHARS or (not known and len(credential) < MIN_UNKNOWN_SCHEME_CREDENTIAL):
        return [value]
    return [value, credential]


def _find_all(haystack: str, needle: str, found: list[tuple[int, int]], pad: str = "") -> None:
    at = haystack.find(needle)
    while at >= 0:
        end = at + len(needle)
        while pad and end < len(haystack) and haystack[end] == pad:
            end += 1
        found.append((at, end))
        at = haystack.find(needle, end)


class Scrubber:
    """Masks known secret values in text and JSON values, in their encoded forms too.

    Matched forms: raw; JSON-escaped (also escaped twice) and `\\uXXXX`-escaped, any mix; percent-encoded
    (quote and quote_plus, either hex case); HTML character references (decimal, hex, named); base64 (std
    and urlsafe, padded or not) of the secret alone or inside a longer blob such as `user:secret` (the whole
    base64 run is masked); the secret in another case, hex-encoded or base32-encoded (see `_transformed`);
    in JSON values, a secret split across string values (in document order: neighbours in an array,
    fields of nested objects, content items). The credential of an authorization value (`Bearer <token>`) is a
    secret of its own (`secret_parts`). Apply it to the full text, before any truncation. The cases live in
    tests/fixtures/scrub_corpus/cases.jsonl.
    """

    def __init__(self, secrets: Iterable[str], *, combine: bool = True) -> None:
        parts = {p for s in secrets if isinstance(s, str) for p in secret_parts(s)}
        values = sorted({s for s in parts if len(s) >= MIN_SECRET_CHARS}, key=len, reverse=True)
        self.values: tuple[str, ...] = tuple(values)
        # A few values (one call's, one chat's): one combined pass, compiled once per set. Many (the log filter's):
        # one cached pattern per value, so a new secret never recompiles the others.
        few = combine and len(values) <= COMBINE_UP_TO
        self._matchers = [_combined(self.values)] if few else [_matcher(v) for v in values]
        self._transformed = _transformed(self.values) if values else None
        # The longest text one raw secret can become (six-char \uXXXX escapes twice over, or %XX of 4 bytes).
        self.max_form_chars = max((len(v) * 12 for v in values), default=0)

    def __bool__(self) -> bool:
        return bool(self.values)

    def spans(self, text: str, *, base64_runs: bool = True) -> list[tuple[int, int]]:
        """Sorted, merged (start, end) ranges of `text` to mask (without `base64_runs`: no base64 core search,
        whose match grows to the whole run of base64 characters around it)."""
        found: list[tuple[int, int]] = []
        if self._transformed:
            # str.find on the lower-cased text (C speed); lower() keeps offsets unless a character changes length.
            lowered = text.lower()
            if len(lowered) == len(text):
                for form, pad in self._transformed:
                    _find_all(lowered, form, found, pad)
            else:
                pattern = re.compile("|".join(re.escape(f) + ("=*" if pad else "") for f, pad in self._transformed),
                                     re.IGNORECASE)
                found += [m.span() for m in pattern.finditer(text)]
        for forms, cores in self._matchers:
            found += [m.span() for m in forms.finditer(text)]
            for core in cores if base64_runs else ():
                at = text.find(core)
                while at >= 0:
                    start, end = at, at + len(core)
                    while start > 0 and text[start - 1] in _B64_CHARS:
                        start -= 1
                    while end < len(text) and text[end] in _B64_CHARS:
                        end += 1
                    while end < len(text) and text[end] == "=":
                        end += 1
                    found.append((start, end))
                    at = text.find(core, end)
        return _merged(found)

    def prefix_start(self, text: str, start: int, end: int) -> int | None:
        """Where, in text[start:end], the earliest beginning of a secret's form runs to `end` (a cut secret)."""
        hits = [m.start() for m in (_prefix(v).search(text, start, end) for v in self.values) if m]
        return min(hits) if hits else None

    def text(self, text: str) -> str:
        if not self.values or not text:
            return text
        spans = self.spans(text)
        if not spans:
            return text
        out, pos = [], 0
        for start, end in spans:
            out += [text[pos:start], MASK]
            pos = end
        out.append(text[pos:])
        return "".join(out)

    def value(self, value: Any) -> Any:
        """A copy of a JSON-like value with every string (keys too) scrubbed, and a secret split across its
        string values masked in each of them."""
        if not self.values:
            return value
        texts, cuts = self._split(value)
        count = iter(range(len(texts)))
        return self._rebuilt(value, lambda text: self._leaf(text, cuts.get(next(count), [])))

    def _split(self, value: Any) -> tuple[list[str], dict[int, list[tuple[int, int]]]]:
        """The string values of `value` in document order, and per string (by index) the ranges of a secret split
        across them: halves in neighbouring values, or in the same field of sibling items (each content item's
        `text`, whatever other fields lie between them)."""
        leaves: list[tuple[Any, str]] = []
        _strings_of(value, None, leaves)
        texts = [text for _, text in leaves]
        fields: dict[Any, list[int]] = {}
        for i, (key, _) in enumerate(leaves):
            fields.setdefault(key, []).append(i)
        runs = [list(range(len(leaves)))] + [run for run in fields.values() if 1 < len(run) < len(leaves)]
        cuts: dict[int, list[tuple[int, int]]] = {}
        for run in runs:
            self._across(texts, run, cuts)
        return texts, cuts

    def _leaf(self, text: str, extra: list[tuple[int, int]]) -> str:
        """One string of a value, scrubbed. A string that is itself JSON (a tool's structured answer as text)
        holding a secret split across its fields is written again from its scrubbed value."""
        nested = _json_container(text)
        if nested is not None and self._split(nested)[1]:
            return self.text(json.dumps(self.value(nested), ensure_ascii=False))
        return self._masked(text, extra)

    def _rebuilt(self, value: Any, leaf: Callable[[str], str]) -> Any:
        if isinstance(value, str):
            return leaf(value)
        if isinstance(value, Mapping):
            out = {}
            for k, v in value.items():
                out[self.text(k) if isinstance(k, str) else k] = self._rebuilt(v, leaf)
            return out
        if isinstance(value, list | tuple):
            return [self._rebuilt(v, leaf) for v in value]
        return value

    def _across(self, texts: list[str], run: list[int], cuts: dict[int, list[tuple[int, int]]]) -> None:
        """Add to `cuts` (per string, by index) the ranges that belong to a secret crossing from one string of
        `run` into the next: the strings are scrubbed as one text and a match over a boundary is cut back into the
        pieces each string holds (the base64 search, which grows to the whole run, stays per string)."""
        if len(run) < 2:
            return
        bounds, at = [], 0
        for i in run:
            bounds.append(at)
            at += len(texts[i])
        for start, end in self.spans("".join(texts[i] for i in run), base64_runs=False):
            first = bisect.bisect_right(bounds, start) - 1
            last = bisect.bisect_left(bounds, end) - 1
            for n in range(first, last + 1) if last > first else ():
                i = run[n]
                lo, hi = max(start, bounds[n]) - bounds[n], min(end, bounds[n] + len(texts[i])) - bounds[n]
                if hi > lo:
                    cuts.setdefault(i, []).append((lo, hi))

    def _masked(self, text: str, extra: list[tuple[int, int]]) -> str:
        """`text` scrubbed, with the `extra` ranges masked too."""
        if not extra:
            return self.text(text)
        out, pos = [], 0
        for start, end in _merged(self.spans(text) + extra):
            out += [text[pos:start], MASK]
            pos = end
        out.append(text[pos:])
        return "".join(out)


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


MAX_JSON_TEXT = 1024 * 1024  # a string this long or shorter that looks like JSON is read as JSON too


def _json_container(text: str) -> Any:
    """The object or array a string holds as JSON text, else None."""
    if len(text) > MAX_JSON_TEXT or text.lstrip()[:1] not in ("{", "["):
        return None
    try:
        parsed = json.loads(text)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict | list) else None


def _strings_of(value: Any, key: Any, into: list[tuple[Any, str]]) -> None:
    """Every string value of a JSON-like value with the name of the field holding it (the nearest key; list
    items take their list's), in document order. Keys are not among them: a name between two halves is no part
    of either."""
    if isinstance(value, str):
        into.append((key, value))
    elif isinstance(value, Mapping):
        for k, v in value.items():
            _strings_of(v, k, into)
    elif isinstance(value, list | tuple):
        for v in value:
            _strings_of(v, key, into)


_known_lock = threading.Lock()
# Every secret a scrubber was built for in this process (capped): what the log filter masks.
_known: dict[str, None] = {}
MAX_KNOWN = 1024


@functools.lru_cache(maxsize=512)
def _scrubber(values: tuple[str, ...]) -> Scrubber:
    return Scrubber(values)


def scrubber(secrets: Iterable[str]) -> Scrubber:
    """The scrubber for these secret values (cached), remembered for the log filter."""
    values = tuple(sorted({s for s in secrets if isinstance(s, str) and len(s) >= MIN_SECRET_CHARS}))
    if values:
        with _known_lock:
            for v in values:
                _known[v] = None
            while len(_known) > MAX_KNOWN:
                _known.pop(next(iter(_known)))
    return _scrubber(values)


def scrub(value: Any, secrets: Iterable[str]) -> Any:
    """`value` (text or JSON-like) with every known secret masked in any of its encoded forms."""
    return scrubber(secrets).value(value)


def scrub_text(text: str, secrets: Iterable[str]) -> str:
    """Free text with secrets masked (and NULs, which no database stores, made visible)."""
    return scrubber(secrets).text(text.replace("\x00", "\\x00"))


def redact(value: Any, secrets: Iterable[str] = ()) -> Any:
    """Audit arguments: a copy with secret-looking keys masked and known secret values scrubbed."""
    s = scrubber(secrets)

    def walk(v: Any) -> Any:
        if isinstance(v, dict):
            return {
                s.text(str(k).replace("\x00", "\\x00")): MASK
                if isinstance(k, str) and SECRET_KEY_RE.search(k) and item not in (None, "")
                else walk(item)
                for k, item in v.items()
            }
        if isinstance(v, list):
            return [walk(item) for item in v]
        if isinstance(v, str):
            return s.text(v.replace("\x00", "\\x00"))
        return v

    return walk(value)


class StreamScrubber:
    """Scrubs text that arrives in pieces (a model's streamed deltas): holds back what may start a secret."""

    def __init__(self, scrubber: Scrubber) -> None:
        self.scrubber = scrubber
        self.pending = ""

    def feed(self, piece: str) -> str:
        """What may be shown now, scrubbed."""
        if not self.scrubber:
            return piece
        self.pending += piece
        cut = self._hold_from(self.pending)
        for start, end in self.scrubber.spans(self.pending):
            if start < cut < end:
                cut = end
        head, self.pending = self.pending[:cut], self.pending[cut:]
        return self.scrubber.text(head)

    def _hold_from(self, text: str) -> int:
        """Where the part that may still become a secret begins: a trailing partial escape, the trailing
        base64-alphabet word, or a trailing beginning of a secret's form."""
        floor = max(0, len(text) - self.scrubber.max_form_chars)
        partial = _PARTIAL_ESCAPE.search(text, floor)
        end = partial.start() if partial else len(text)
        cut = end
        while cut > floor and text[cut - 1] in _B64_CHARS:
            cut -= 1
        started = self.scrubber.prefix_start(text, floor, end)
        return min(cut, started) if started is not None else cut

    def flush(self) -> str:
        rest, self.pending = self.pending, ""
        return self.scrubber.text(rest)


_RECORD_FIELDS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


class SecretLogFilter(logging.Filter):
    """A structured log filter: masks every secret this process built a scrubber for in every field of the
    record (message and args, `extra=` fields of any type, exception and stack text), not only the message."""

    def filter(self, record: logging.LogRecord) -> bool:
        with _known_lock:
            values = tuple(_known)
        if not values:
            return True
        s = Scrubber(values, combine=False)  # per-value patterns, each compiled once: building this is cheap
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a malformed record is logging's problem, not a reason to leak
            message = str(record.msg)
        record.msg, record.args = s.text(message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = s.text(record.exc_text)
            # A handler that formats exc_info itself (or reads the exception's args) would print it unmasked.
            record.exc_info = None
        if record.stack_info:
            record.stack_info = s.text(record.stack_info)
        for key, value in list(vars(record).items()):
            if key not in _RECORD_FIELDS:
                setattr(record, key, _scrub_extra(s, value))  # `extra=` fields a formatter or handler may print
        return True


def _scrub_extra(s: Scrubber, value: Any) -> Any:
    """A log record's extra field with secrets masked: JSON-like values keep their shape, other objects are
    replaced by their scrubbed text when that text held a secret."""
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, str | Mapping | list | tuple):
        return s.value(value)
    text = str(value)
    scrubbed = s.text(text)
    return value if scrubbed == text else scrubbed
