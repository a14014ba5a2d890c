"""The screen on what a server tells the model: rules (rules.json, versioned) applied to texts, giving findings.

Django-free. `screen(texts)` takes (field, text) pairs (`function_texts` builds them from a function's definition)
and returns one Finding per matched span; `reveal` makes invisible characters visible (`⟨U+E0041⟩`);
`clean_result` strips them from a tool result and names the injection markers it carries.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Collection, Iterable, Iterator
from dataclasses import asdict, dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import Any, Literal

Severity = Literal["high", "medium", "low"]
SEVERITIES: tuple[Severity, ...] = ("high", "medium", "low")
RULES_FILE = Path(__file__).with_name("rules.json")
MAX_EXCERPT = 160
# Tag characters U+E0020..E007E mirror printable ASCII: what a smuggled instruction says once decoded.
TAG_BASE = 0xE0000
# Techniques whose rules also mark a tool *result* (injection through results); the others describe definitions.
RESULT_TECHNIQUES = frozenset({"invisible", "instructions"})
RESULT_RULE_IDS = frozenset({"pass_secrets", "send_to_destination", "sensitive_file_read", "markdown_image_url"})


@dataclass(frozen=True)
class Rule:
    id: str
    technique: str
    severity: Severity
    kind: str
    why: str
    pattern: re.Pattern[str] | None = None
    max_chars: int = 0
    fields: str = ""
    scope: str = ""


@dataclass(frozen=True)
class Finding:
    rule: str
    severity: Severity
    field: str
    excerpt: str

    def as_dict(self) -> dict[str, str]:
        return asdict(self)


@dataclass(frozen=True)
class RuleSet:
    version: int
    rules: tuple[Rule, ...]

    def by_id(self, rule_id: str) -> Rule:
        return next(r for r in self.rules if r.id == rule_id)


def _compile(raw: dict[str, Any]) -> Rule:
    kind = raw["kind"]
    pattern = None
    if kind == "chars":
        pattern = re.compile(f"[{raw['chars']}]+")
    elif kind == "regex":
        pattern = re.compile(raw["pattern"], re.IGNORECASE)
    elif kind not in ("shadow", "length"):
        raise ValueError(f"screen rule {raw.get('id')!r}: unknown kind {kind!r} (chars, regex, shadow, length)")
    if raw["severity"] not in SEVERITIES:
        raise ValueError(f"screen rule {raw['id']!r}: severity must be one of {SEVERITIES}")
    return Rule(id=raw["id"], technique=raw["technique"], severity=raw["severity"], kind=kind, why=raw["why"],
                pattern=pattern, max_chars=int(raw.get("max_chars", 0)), fields=raw.get("fields", ""),
                scope=raw.get("scope", ""))


@cache
def ruleset() -> RuleSet:
    """The rules of rules.json, compiled once."""
    data = json.loads(RULES_FILE.read_text(encoding="utf-8"))
    return RuleSet(version=int(data["version"]), rules=tuple(_compile(r) for r in data["rules"]))


def _invisible_class() -> re.Pattern[str]:
    chars = "".join(r.pattern.pattern[1:-2] for r in ruleset().rules if r.kind == "chars" and r.pattern is not None)
    return re.compile(f"[{chars}]")


@cache
def invisible_re() -> re.Pattern[str]:
    """Every character the `chars` rules name (what `strip_invisible` removes)."""
    return _invisible_class()


def _visible(ch: str) -> str:
    cp = ord(ch)
    if invisible_re().match(ch) or unicodedata.category(ch) in ("Cf", "Co") and ch not in "\u200c\u200d\u200e\u200f":
        return f"⟨U+{cp:04X}⟩"
    return ch


def reveal(text: str) -> str:
    """The text with invisible and format characters shown as ⟨U+XXXX⟩ (what the model reads, made visible)."""
    return "".join(_visible(ch) for ch in text)


def strip_invisible(text: str) -> tuple[str, int]:
    """The text without the characters the `chars` rules name, and how many were removed."""
    cleaned, count = invisible_re().subn("", text)
    return cleaned, count


_TAG_RUN = re.compile("[\U000E0020-\U000E007E]+")


def decode_tags(text: str) -> str:
    """What the Unicode tag characters of a text spell in ASCII ('' when there are none)."""
    return "".join(chr(ord(ch) - TAG_BASE) for run in _TAG_RUN.findall(text) for ch in run)


def _excerpt(span: str) -> str:
    shown = reveal(span)
    return shown if len(shown) <= MAX_EXCERPT else shown[: MAX_EXCERPT - 1] + "…"


# A prompt's or resource's own description or title (server_texts): judged like a function's description.
_ITEM_DESCRIPTION = re.compile(r"^(?:prompts|resources)\.[^\n]*\.(?:description|title)$")


def _is_description(field: str) -> bool:
    return field in ("description", "title") or (bool(_ITEM_DESCRIPTION.match(field)) and ".arguments." not in field)


def _length_applies(rule: Rule, field: str) -> bool:
    if rule.fields == "server":
        return field.startswith("server.")
    if rule.fields == "description":
        return _is_description(field)
    return not field.startswith("server.") and not _is_description(field)


@lru_cache(maxsize=32)
def _name_pattern(names: frozenset[str]) -> re.Pattern[str] | None:
    # Identifier-shaped names only: a function called `search` is also an English word every description uses.
    # Cached: a discovery screens each function against the same others (one pattern build, not one per function:
    # a sort, an escape and a join over the tenant's every function name).
    words = sorted({n for n in names if len(n) >= 4 and re.search(r"[_\-0-9]", n)}, key=len, reverse=True)
    if not words:
        return None
    return re.compile(r"(?<![\w-])(?:" + "|".join(re.escape(w) for w in words) + r")(?![\w-])", re.IGNORECASE)


def _matches(rule: Rule, field: str, text: str, shadow: dict[str, re.Pattern[str] | None]) -> Iterator[str]:
    if rule.kind == "length":
        if _length_applies(rule, field) and len(text) > rule.max_chars:
            yield f"{len(text)} characters (normal is under {rule.max_chars}): " + text[:60]
        return
    if rule.kind == "shadow" and field == "name":
        return  # two servers offering the same name collide (the gateway qualifies names); shadowing is prose
    pattern = rule.pattern if rule.kind != "shadow" else shadow.get(rule.scope)
    if pattern is None:
        return
    for m in pattern.finditer(text):
        yield m.group(0)


def screen(texts: Iterable[tuple[str, str]], *, other_names: Collection[str] = (),
           other_qualified: Collection[str] = (), rules: RuleSet | None = None) -> list[Finding]:
    """Findings on (field, text) pairs: one per rule and matched span (repeats of the same span once).

    `other_names` are the tenant's other tools and their functions, `other_qualified` their `<tool>__<function>`
    names: a text naming them is shadowing. A run of tag characters is also decoded and screened as what it says.
    """
    ruleset_ = rules or ruleset()
    shadow = {"plain": _name_pattern(frozenset(other_names)), "qualified": _name_pattern(frozenset(other_qualified))}
    found: list[Finding] = []
    seen: set[tuple[str, str, str]] = set()
    for field, text in texts:
        if not text:
            continue
        hidden = decode_tags(text)
        sources = [(field, text)] + ([(field, hidden)] if hidden.strip() else [])
        for index, (where, body) in enumerate(sources):
            for rule in ruleset_.rules:
                if index and rule.kind == "chars":
                    continue
                for span in _matches(rule, where, body, shadow):
                    excerpt = _excerpt(span) if not index else "hidden: " + _excerpt(span)
                    key = (rule.id, where, excerpt)
                    if key in seen:
                        continue
                    seen.add(key)
                    found.append(Finding(rule=rule.id, severity=rule.severity, field=where, excerpt=excerpt))
    return _drop_overlapped(found)


def _drop_overlapped(found: list[Finding]) -> list[Finding]:
    """A shadow finding on a qualified name also matches its plain parts; keep the stronger one only."""
    qualified = {(f.field, f.excerpt) for f in found if f.rule == "shadow_qualified_name"}
    return [f for f in found if not (f.rule == "shadow_tool_name" and any(
        field == f.field and f.excerpt.lower() in excerpt.lower() for field, excerpt in qualified))]


def _schema_texts(schema: Any, prefix: str) -> Iterator[tuple[str, str]]:
    """Every string a model reads in a JSON schema: descriptions, titles, defaults, enums, examples."""
    if isinstance(schema, dict):
        for key, value in schema.items():
            path = f"{prefix}.{key}"
            if key in ("description", "title") and isinstance(value, str):
                yield path, value
            elif key in ("default", "const") and isinstance(value, str):
                yield path, value
            elif key in ("enum", "examples") and isinstance(value, list):
                yield from ((f"{path}.{i}", v) for i, v in enumerate(value) if isinstance(v, str))
            elif key == "properties" and isinstance(value, dict):
                for name, sub in value.items():
                    if invisible_re().search(str(name)):  # a property's name is read too, but rarely prose
                        yield f"{path}.{name}", str(name)
                    yield from _schema_texts(sub, f"{path}.{name}")
            elif isinstance(value, (dict, list)):
                yield from _schema_texts(value, path)
    elif isinstance(schema, list):
        for i, item in enumerate(schema):
            yield from _schema_texts(item, f"{prefix}.{i}")


def function_texts(*, name: str = "", title: str = "", description: str = "", input_schema: Any = None,
                   output_schema: Any = None, annotations: Any = None) -> list[tuple[str, str]]:
    """The (field, text) pairs of one function that reach a model."""
    texts = [("name", name), ("title", title), ("description", description)]
    if isinstance(annotations, dict) and isinstance(annotations.get("title"), str):
        texts.append(("annotations.title", annotations["title"]))
    texts += list(_schema_texts(input_schema or {}, "input_schema"))
    texts += list(_schema_texts(output_schema or {}, "output_schema"))
    return [(f, t) for f, t in texts if t]


def server_texts(*, instructions: str = "", prompts: Iterable[dict[str, Any]] = (),
                 resources: Iterable[dict[str, Any]] = ()) -> list[tuple[str, str]]:
    """The (field, text) pairs a server tells a model besides its tools: `server.instructions`,
    `prompts.<name>.{title,description}`, `prompts.<name>.arguments.<arg>.description`,
    `resources.<name>.{title,description}` (a name itself only when it hides invisible characters)."""
    texts = [("server.instructions", instructions)]
    for kind, items in (("prompts", prompts), ("resources", resources)):
        for item in items:
            name = str(item.get("name") or "")
            if invisible_re().search(name):
                texts.append((f"{kind}.{name}.name", name))
            texts += [(f"{kind}.{name}.title", str(item.get("title") or "")),
                      (f"{kind}.{name}.description", str(item.get("description") or ""))]
            for arg in item.get("arguments") or []:
                if isinstance(arg, dict):
                    texts.append((f"{kind}.{name}.arguments.{arg.get('name')}.description",
                                  str(arg.get("description") or "")))
    return [(f, t) for f, t in texts if t]


def item_of(field: str) -> tuple[str, str] | None:
    """('prompts' | 'resources', name) of a server_texts field; None for the instructions."""
    kind, _, rest = field.partition(".")
    if kind not in ("prompts", "resources"):
        return None
    for suffix in (".name", ".title", ".description"):
        if rest.endswith(suffix) and ".arguments." not in rest:
            return kind, rest[: -len(suffix)]
    return kind, rest.split(".arguments.", 1)[0]


def worst(findings: Iterable[Finding | dict[str, Any]]) -> Severity | None:
    """The highest severity among findings (None when there are none)."""
    levels = {(f.severity if isinstance(f, Finding) else f.get("severity")) for f in findings}
    return next((s for s in SEVERITIES if s in levels), None)


@dataclass(frozen=True)
class CleanResult:
    text: str
    removed: int
    findings: list[Finding]

    @property
    def flagged(self) -> bool:
        return bool(self.removed) or any(f.severity != "low" for f in self.findings)

    def markers(self) -> list[str]:
        """The rule ids a result tripped, for events, `_meta` and the audit."""
        ids = {f.rule for f in self.findings if f.severity != "low"}
        return sorted(ids)


# A result's prose rules read its head and tail only (a 100 KB result took 240 ms through every pattern on the
# call path); the character rules and the stripping read all of it. Chat shows a model far less than this anyway.
RESULT_HEAD, RESULT_TAIL = 12_000, 4_000


@cache
def _result_rules() -> tuple[RuleSet, RuleSet]:
    rs = ruleset()
    wanted = [r for r in rs.rules if (r.technique in RESULT_TECHNIQUES or r.id in RESULT_RULE_IDS)
              and r.kind != "length"]
    return (RuleSet(version=rs.version, rules=tuple(r for r in wanted if r.kind == "chars")),
            RuleSet(version=rs.version, rules=tuple(r for r in wanted if r.kind != "chars")))


def clean_result(text: str, *, field: str = "result") -> CleanResult:
    """A tool result's text without invisible characters, with the injection markers it carries."""
    chars, prose = _result_rules()
    window = text if len(text) <= RESULT_HEAD + RESULT_TAIL else text[:RESULT_HEAD] + "\n" + text[-RESULT_TAIL:]
    findings = screen([(field, text)], rules=chars) + screen([(field, window)], rules=prose)
    cleaned, removed = strip_invisible(text)
    return CleanResult(text=cleaned, removed=removed, findings=findings)
