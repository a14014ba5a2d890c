"""The tool form: structured config per type (from the spec), a raw JSON "advanced" mode, errors at their fields."""

from __future__ import annotations

import json
from typing import Any

from django import forms

from core.errors import DomainError
from core.secrets import KEEP
from tools_app import selectors
from tools_app.admin.config_form import (
    FORM_TYPES,
    config_fields,
    config_from_cleaned,
    error_field,
    initial_from_config,
    pretty,
)
from tools_app.configs import mask_config
from tools_app.models import Tool, ToolType
from tools_app.services.tools import check_name, config_check

# Generic in their model for the type checker (django_stubs_ext.monkeypatch() in the settings makes Django's
# classes subscriptable at run time too).
_ToolForm = forms.ModelForm[Tool]


class BaseToolAdminForm(_ToolForm):
    """Write-only secrets: stored secret values appear as the mask, which keeps them when submitted."""

    config_advanced = forms.BooleanField(
        label="Edit the config as raw JSON (advanced)", required=False,
        help_text="When ticked, the JSON below is saved instead of the fields above.",
    )
    config_json = forms.CharField(
        label="Config (JSON)", required=False,
        widget=forms.Textarea(attrs={"rows": 12, "cols": 80, "autocomplete": "off", "spellcheck": "false"}),
        help_text='Secret values show as "********", which keeps the stored value; "not_secret" lists the '
                  "entries of env/headers whose values are shown (e.g. env.CURRENCY). Blank keeps the stored config.",
    )

    class Meta:
        model = Tool
        fields = ["tenant", "name", "description", "type", "status", "safety", "requires_approval", "unsandboxed"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if "type" in self.fields:
            field = self.fields["type"]
            field.choices = [("", "---------"), *((t, ToolType(t).label) for t in FORM_TYPES)]  # type: ignore[attr-defined]
            field.help_text = "Built-in tools come from the registry and cannot be created here."
        if self.instance.pk and self.instance.type in FORM_TYPES:
            masked = mask_config(self.instance.type, self.instance.config)
            self.initial.update(initial_from_config(self.instance.type, masked))
            self.initial.setdefault("config_json", pretty(masked))

    def tool_type(self) -> str:
        if self.instance.pk:
            return str(self.instance.type)
        return str(self.cleaned_data.get("type") or "")

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        tool_type = self.tool_type()
        self._check_name(cleaned)
        if tool_type not in FORM_TYPES:
            return cleaned
        advanced = bool(cleaned.get("config_advanced"))
        config = self._raw_config(cleaned) if advanced else self._structured_config(tool_type, cleaned)
        if config is None:
            return cleaned
        cleaned["config_value"] = config
        if config is KEEP:
            return cleaned
        try:
            # The save's own check (merge of kept secrets, origin rule, the spec): nothing is written here.
            config_check(tool=self.instance if self.instance.pk else None, tool_type=tool_type, incoming=config)
        except DomainError as exc:
            self._place(exc, tool_type, advanced)
        return cleaned

    def _check_name(self, cleaned: dict[str, Any]) -> None:
        name = cleaned.get("name")
        tenant = self.instance.tenant if self.instance.pk else cleaned.get("tenant")
        if not name or name == self.instance.name:
            return
        try:
            check_name(name)
        except DomainError as exc:
            self.add_error("name", exc.message)
            return
        if tenant is not None and selectors.tool_list(tenant=tenant).filter(name=name).exists():
            self.add_error("name", f"a tool named {name!r} already exists in this tenant")

    def _raw_config(self, cleaned: dict[str, Any]) -> Any:
        raw = (cleaned.get("config_json") or "").strip()
        if not raw:
            if self.instance.pk:
                return KEEP
            self.add_error("config_json", "a new tool needs a config")
            return None
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as exc:
            # The position, never the text: it may hold a secret.
            self.add_error("config_json", f"config is not valid JSON: {exc.msg} at line {exc.lineno}")
            return None
        if not isinstance(value, dict):
            self.add_error("config_json", "config must be a JSON object")
            return None
        return value

    def _structured_config(self, tool_type: str, cleaned: dict[str, Any]) -> dict[str, Any] | None:
        own = [name for name in config_fields(tool_type) if name in self.fields]
        if any(name in self.errors for name in own):
            return None  # a field's own check failed (JSON, duplicate rows): it says so already
        return config_from_cleaned(tool_type, cleaned)

    def _place(self, exc: DomainError, tool_type: str, advanced: bool) -> None:
        details = exc.details or {}
        errors = details.get("errors") or [{"field": details.get("field", ""), "message": exc.message}]
        for err in errors:
            message = str(err.get("message") or exc.message)
            path = str(err.get("field") or "")
            target = "config_json" if advanced else error_field(tool_type, path, set(self.fields))
            if path and target is None or advanced:
                message = f"{path}: {message}" if path and not message.startswith(path) else message
            self.add_error(target, message)


def tool_admin_form() -> type[BaseToolAdminForm]:
    """The form class with every structured type's fields declared (the page shows the chosen type's)."""
    attrs: dict[str, Any] = {"__module__": __name__}
    for tool_type in FORM_TYPES:
        attrs.update(config_fields(tool_type))
    return type("ToolAdminForm", (BaseToolAdminForm,), attrs)


ToolAdminForm = tool_admin_form()
