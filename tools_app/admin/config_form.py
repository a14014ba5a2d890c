"""Structured config fields per tool type, generated from the typed config spec (tools_app.configs.describe).

The admin and the API validate with the same spec: this module only turns each spec field into a form
field and back. Secret-map rows carry a "secret" flag: a shown row goes to the config's `not_secret` list; a
secret row shows the mask and keeps the stored value while the mask is left in place (core.secrets' rule).
"""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.utils.html import escape, format_html, format_html_join
from django.utils.safestring import SafeString

from core.secrets import MASK, NOT_SECRET, plain_keys
from tools_app.configs import SECRET_MAPS, FieldDoc, describe

FORM_TYPES = ("LOCAL", "REMOTE", "HTTP")
ROW_BLANKS = 2  # empty rows offered after the stored ones (the "Add row" button adds more)


class RowsWidget(forms.Widget):
    """Key/value rows (`<name>-key`, `<name>-value`, `<name>-secret` repeated, read back in order)."""

    def __init__(self, *, secret_column: bool, attrs: dict[str, Any] | None = None) -> None:
        super().__init__(attrs)
        self.secret_column = secret_column

    def value_from_datadict(self, data: Any, files: Any, name: str) -> list[dict[str, Any]]:
        keys, values = data.getlist(f"{name}-key"), data.getlist(f"{name}-value")
        flags = data.getlist(f"{name}-secret") if self.secret_column else []
        rows = []
        for i, key in enumerate(keys):
            secret = (flags[i] if i < len(flags) else "1") != "0" if self.secret_column else False
            rows.append({"key": key, "value": values[i] if i < len(values) else "", "secret": secret})
        return rows

    def value_omitted_from_data(self, data: Any, files: Any, name: str) -> bool:
        return f"{name}-key" not in data

    def format_value(self, value: Any) -> Any:
        return value

    def _row(self, name: str, row: dict[str, Any]) -> SafeString:
        secret = bool(row.get("secret", self.secret_column)) and self.secret_column
        flag = format_html(
            '<td><select name="{}-secret" class="toolhub-secret-flag" aria-label="secret or shown">'
            '<option value="1"{}>secret</option><option value="0"{}>shown</option></select></td>',
            name, " selected" if secret else "", "" if secret else " selected",
        ) if self.secret_column else ""
        value = row.get("value", "")
        hint = ' title="stored secret: leave ******** to keep it, type to replace it"' if value == MASK else ""
        # A secret typed into a form that failed to save is kept, in a box that does not display it.
        kind = "password" if secret and value and value != MASK else "text"
        return format_html(
            '<tr class="toolhub-row"><td><input type="text" name="{}-key" value="{}" class="toolhub-key" '
            'autocomplete="off" spellcheck="false" aria-label="name"></td>'
            '<td><input type="{}" name="{}-value" value="{}" class="toolhub-value{}" autocomplete="{}" '
            'spellcheck="false" aria-label="value"{}></td>{}'
            '<td><button type="button" class="toolhub-remove-row" title="remove row">&times;</button></td></tr>',
            name, row.get("key", ""), kind, name, value, " toolhub-secret" if secret else "",
            "new-password" if kind == "password" else "off", SafeString(hint), flag,
        )

    def render(self, name: str, value: Any, attrs: dict[str, Any] | None = None, renderer: Any = None) -> SafeString:
        rows = [r for r in (value or []) if isinstance(r, dict)]
        while rows and not rows[-1].get("key") and not rows[-1].get("value"):
            rows.pop()  # a re-shown form offers the same few blank rows, not more each time
        rows += [{"key": "", "value": "", "secret": self.secret_column}] * ROW_BLANKS
        head = format_html("<th>Name</th><th>Value</th>{}<th></th>",
                           SafeString("<th>Secret?</th>") if self.secret_column else "")
        body = format_html_join("", "{}", ((self._row(name, r),) for r in rows))
        return format_html(
            '<div class="toolhub-rows" id="{}" data-name="{}" data-secret-column="{}">'
            '<table><thead><tr>{}</tr></thead><tbody>{}</tbody></table>'
            '<button type="button" class="toolhub-add-row">Add row</button></div>',
            (attrs or {}).get("id", f"id_{name}"), name, "1" if self.secret_column else "0", head, body,
        )


class RowsField(forms.Field):
    """A name → value map as rows; returns the rows (the secret flag decides `not_secret`)."""

    def __init__(self, *, secret_column: bool, **kwargs: Any) -> None:
        kwargs.setdefault("widget", RowsWidget(secret_column=secret_column))
        super().__init__(**kwargs)

    def clean(self, value: Any) -> list[dict[str, Any]]:
        rows = [r for r in (value or []) if r.get("key", "").strip() or r.get("value", "")]
        seen: set[str] = set()
        for row in rows:
            key = row["key"].strip()
            if not key:
                raise forms.ValidationError("a row has a value but no name")
            if key in seen:
                raise forms.ValidationError(f"{key!r} appears twice")
            seen.add(key)
            row["key"] = key
        return rows


class LinesField(forms.CharField):
    """A list of strings, one per line (arguments: one item per line, kept exactly, blank lines dropped)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("widget", forms.Textarea(attrs={"rows": 4, "cols": 60, "spellcheck": "false"}))
        super().__init__(strip=False, **kwargs)

    def prepare_value(self, value: Any) -> Any:
        return "\n".join(str(v) for v in value) if isinstance(value, list) else value

    def to_python(self, value: Any) -> list[str] | None:  # type: ignore[override]
        text = super().to_python(value)
        lines = [line.rstrip("\r") for line in (text or "").split("\n")]
        items = [line for line in lines if line.strip()]
        return items or None


def field_name(tool_type: str, name: str) -> str:
    return f"{tool_type.lower()}_{name}"


def help_html(text: str) -> str:
    """A spec's help as safe HTML: the admin renders help_text unescaped, so `<command>` would vanish as a tag;
    backticked spans become <code>."""
    parts = str(escape(text or "")).split("`")
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))


class PlainFloatField(forms.FloatField):
    """A float shown as typed: 20, not 20.0."""

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, float) and value.is_integer():
            return int(value)
        return value


def _doc_field(doc: FieldDoc) -> forms.Field:
    label, help_text = doc.name.replace("_", " ").capitalize(), help_html(doc.help)
    common: dict[str, Any] = {"label": label, "help_text": help_text, "required": False}
    if doc.type.startswith("dict[str, str]"):
        common["help_text"] = help_text.replace("listed in not_secret", "marked shown")
        return RowsField(secret_column=doc.secret, **common)
    if doc.type.startswith("list[str]"):
        return LinesField(**common)
    if doc.choices:
        return forms.ChoiceField(choices=[(c, c) for c in doc.choices], initial=doc.default, **common)
    if doc.type == "float":
        return PlainFloatField(initial=doc.default, widget=forms.NumberInput(attrs={"step": "any"}), **common)
    if doc.type == "bool":
        return forms.BooleanField(initial=doc.default, **common)
    if doc.type == "str" or doc.type.startswith("str |") or doc.type.startswith("Optional[str]"):
        return forms.CharField(initial=doc.default or "", widget=forms.TextInput(attrs={"size": 70}), **common)
    # Anything else (a JSON body template, an input schema) is JSON text.
    return JSONTextField(initial=doc.default, widget=forms.Textarea(attrs={"rows": 6, "cols": 70}), **common)


class JSONTextField(forms.JSONField):
    """JSON text where "no value" is an empty box, not the word null."""

    def prepare_value(self, value: Any) -> Any:
        return "" if value is None else super().prepare_value(value)


def spec_docs(tool_type: str) -> list[FieldDoc]:
    return [d for d in describe(tool_type) if d.name != NOT_SECRET]


def config_fields(tool_type: str) -> dict[str, forms.Field]:
    """Form fields for one tool type's config, named `<type>_<field>`."""
    fields = {}
    for doc in spec_docs(tool_type):
        f = _doc_field(doc)
        if doc.required:
            f.label = f"{f.label} *"
        fields[field_name(tool_type, doc.name)] = f
    return fields


def initial_from_config(tool_type: str, masked: dict[str, Any]) -> dict[str, Any]:
    """Initial form values from a masked config: shown rows carry their values, secret rows the mask."""
    plain = plain_keys(masked)
    initial: dict[str, Any] = {}
    for doc in spec_docs(tool_type):
        if doc.name not in masked:
            continue
        value = masked[doc.name]
        if doc.type.startswith("dict[str, str]") and isinstance(value, dict):
            value = [{"key": k, "value": v, "secret": doc.secret and f"{doc.name}.{k}" not in plain}
                     for k, v in value.items()]
        elif value is None and doc.type.startswith("str"):
            value = ""
        initial[field_name(tool_type, doc.name)] = value
    return initial


def config_from_cleaned(tool_type: str, cleaned: dict[str, Any]) -> dict[str, Any]:
    """The config object a structured form submits (masks left in place: the service's merge keeps them)."""
    config: dict[str, Any] = {}
    not_secret: list[str] = []
    for doc in spec_docs(tool_type):
        value = cleaned.get(field_name(tool_type, doc.name))
        if doc.type.startswith("dict[str, str]"):
            rows = value or []
            config[doc.name] = {r["key"]: r["value"] for r in rows}
            if doc.name in SECRET_MAPS[tool_type]:
                not_secret += [f"{doc.name}.{r['key']}" for r in rows if not r["secret"]]
            continue
        if value in (None, "") and doc.type != "bool":
            # Left out: the spec's default applies, or the spec says the field is required.
            if doc.type.startswith("str |"):
                config[doc.name] = None
            continue
        config[doc.name] = value
    if not_secret:
        config[NOT_SECRET] = not_secret
    return config


def error_field(tool_type: str, path: str, available: set[str]) -> str | None:
    """The form field an error about `config.<field>[.<key>]` belongs to (None: the form as a whole)."""
    parts = path.split(".")
    if parts and parts[0] == "config":
        parts = parts[1:]
    if not parts:
        return None
    if parts[0] == NOT_SECRET:
        return None
    name = field_name(tool_type, parts[0])
    return name if name in available else None


def pretty(config: dict[str, Any]) -> str:
    return json.dumps(config, indent=2, ensure_ascii=False)
