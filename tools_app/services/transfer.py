"""Export tools (never a secret value) and import an export or a client `mcpServers` document."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from core.codes import ApiCode
from core.errors import DomainError
from tenants_app.models import Role, Tenant
from tenants_app.permissions import ensure_role
from tools_app import client_config, selectors
from tools_app.configs import contains_mask, mask_config, merge_masked, validate_config
from tools_app.errors import ImportFailed
from tools_app.models import Tool, ToolStatus, ToolType
from tools_app.services.tools import ToolInput, tool_create, tool_update

EXPORT_FORMAT = "toolhub.tools/v1"
IMPORTABLE_TYPES = (ToolType.LOCAL, ToolType.REMOTE, ToolType.HTTP)


def tools_export(*, tenant: Tenant, actor: Any, ids: list[int]) -> dict[str, Any]:
    """Every requested tool with its config structure; secret values become the mask placeholder."""
    ensure_role(tenant=tenant, user=actor, at_least=Role.ADMIN)
    tools = list(selectors.tools_by_ids(tenant=tenant, ids=ids).order_by("name"))
    if len(tools) != len(set(ids)):
        from tools_app.errors import ToolNotFound

        raise ToolNotFound()
    return {
        "format": EXPORT_FORMAT,
        "tools": [
            {
                "name": t.name,
                "description": t.description,
                "type": t.type,
                "status": t.status,
                "safety": t.safety,
                "requires_approval": t.requires_approval,
                "config": mask_config(t.type, t.config),
            }
            for t in tools
            if t.type in IMPORTABLE_TYPES
        ],
    }


Row = tuple[str, dict[str, Any] | None, str | None]


def _items_from_document(document: Any) -> list[Row]:
    """(name, tool fields, error) per item of a Toolhub export."""
    items = document.get("tools")
    if not isinstance(items, list):
        raise ImportFailed("the export's \"tools\" must be a list")
    out: list[Row] = []
    for i, item in enumerate(items):
        if not isinstance(item, dict) or not item.get("name"):
            out.append((f"#{i}", None, "each tool needs an object with a name"))
        else:
            out.append((str(item["name"]), item, None))
    return out


def _items_from_client_config(document: Any, *, allow_auto_approve: bool, codes: dict[str, str]) -> list[Row]:
    """(name, tool fields, error) per server of a client config (Claude Desktop, Cursor, Cline, Windsurf,
    VS Code). `${...}` references take the values sent beside the document in `"variables"`; those without
    one are blanked, listed in `needs_variables` and the tool starts DISABLED. Error codes other than
    `unmappable` (e.g. `http_listener_package`) are put in `codes` by item name."""
    given = document.get("variables") if isinstance(document.get("variables"), dict) else {}
    values = {str(k): str(v) for k, v in given.items() if isinstance(v, str | int | float) and str(v)}
    servers, problems = client_config.parse_client_config(document)
    rows: list[Row] = [(p.name or f"#{p.index}", None, p.reason) for p in problems]
    codes.update({p.name or f"#{p.index}": p.code for p in problems})
    for server in servers:
        missing = [v for v in server.variables if v.name not in values]
        notes = list(server.notes)
        auto_approve: list[str] = []
        if server.auto_approve and allow_auto_approve:
            auto_approve = server.auto_approve
        elif server.auto_approve:
            notes.append("autoApprove ignored: this tenant's policy does not let imported configs skip "
                         "approval (allow_imported_auto_approve)")
        rows.append((server.name, {
            "name": server.name,
            "description": server.description,
            "type": server.kind,
            "status": ToolStatus.DISABLED if server.disabled or missing else ToolStatus.ENABLED,
            "config": client_config.substitute(server.config, values),
            "auto_approve_functions": auto_approve,
            "needs_variables": [{"name": v.name, "source": v.source, "is_secret": v.is_secret,
                                 "description": v.description, "used_in": v.used_in} for v in missing],
            "notes": notes,
        }, None))
    return rows


def tools_import(*, tenant: Tenant, actor: Any, document: Any) -> dict[str, Any]:
    """Create one tool per item, each all-or-nothing; report created tools and per-item errors.

    Masked secrets in an export have nothing to keep: the key is created empty, listed in
    `needs_secrets`, and the tool starts DISABLED until a real value is set. A client config's
    unresolved `${...}` references are handled the same way (`needs_variables`).
    """
    ensure_role(tenant=tenant, user=actor, at_least=Role.ADMIN)
    codes: dict[str, str] = {}
    if isinstance(document, dict) and document.get("format") == EXPORT_FORMAT:
        rows = _items_from_document(document)
    elif client_config.is_client_config(document):
        rows = _items_from_client_config(document, allow_auto_approve=tenant.allow_imported_auto_approve,
                                         codes=codes)
    else:
        raise ImportFailed(
            f"unrecognised document; accepted: a Toolhub export (\"format\": \"{EXPORT_FORMAT}\") "
            f"or a client config {client_config.ACCEPTED}"
        )
    created: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []
    for name, item, error in rows:
        if error or item is None:
            errors.append({"name": name, "code": codes.get(name, "unmappable"), "message": error or "cannot map"})
            continue
        tool_type = str(item.get("type", "")).upper()
        if tool_type not in IMPORTABLE_TYPES:
            errors.append({"name": name, "code": ApiCode.INVALID_TYPE,
                           "message": f"type {item.get('type')!r} cannot be imported; accepted: LOCAL, REMOTE, HTTP"})
            continue
        config = item.get("config") or {}
        needs = _blank_masked(tool_type, config)
        needs_variables = item.get("needs_variables") or []
        try:
            with transaction.atomic():
                tool = tool_create(
                    tenant=tenant,
                    actor=actor,
                    data=ToolInput(
                        name=str(item.get("name", "")),
                        description=str(item.get("description") or ""),
                        type=tool_type,
                        status=ToolStatus.DISABLED if needs else item.get("status") or ToolStatus.ENABLED,
                        config=config,
                        safety=item.get("safety"),
                        requires_approval=item.get("requires_approval"),
                    ),
                )
                if item.get("auto_approve_functions"):
                    tool.auto_approve_functions = list(item["auto_approve_functions"])
                    tool.save(update_fields=["auto_approve_functions", "updated_at"])
        except DomainError as exc:
            errors.append({"name": name, "code": exc.code, "message": exc.message})
            continue
        row: dict[str, Any] = {"id": tool.pk, "name": tool.name, "type": tool.type, "status": tool.status,
                               "needs_secrets": needs}
        if "needs_variables" in item:
            row.update(needs_variables=needs_variables, auto_approve=tool.auto_approve_functions,
                       notes=item.get("notes") or [])
        created.append(row)
    return {"created": created, "errors": errors}


def _blank_masked(tool_type: str, config: dict[str, Any]) -> list[str]:
    """Masked secrets have nothing to keep in a new tool: blank them, and say which need a value."""
    needs = contains_mask(tool_type, config)
    for name in needs:
        map_name, key = name.split(".", 1)
        config[map_name][key] = ""
    return needs


SEED_FIELDS = ("name", "description", "type", "status", "safety", "requires_approval", "config")


def tools_seed(*, tenant: Tenant, actor: Any, items: list[tuple[str, Any]]) -> dict[str, Any]:
    """Seed tools from documents, one tool each (`manage.py load_tools`); running it again changes nothing.

    Each item is (source, document) with the fields of an export's tool. Secret values (env, headers,
    HTTP secrets) are never taken from a document: they are read as the mask, so a new tool is created
    with them empty, listed in `needs_secrets` and DISABLED (the import path), and an existing tool keeps
    the values an admin stored. An existing tool of the same name is updated in place when its description,
    safety, approval flag or config structure differ; its status is the admin's and is left alone.
    Returns {"created", "updated", "unchanged", "errors"}, each a list naming the source.
    """
    ensure_role(tenant=tenant, user=actor, at_least=Role.ADMIN)
    out: dict[str, list[dict[str, Any]]] = {"created": [], "updated": [], "unchanged": [], "errors": []}
    seen: dict[str, str] = {}
    for source, document in items:
        problem = _seed_problem(document)
        name = str(document.get("name")) if isinstance(document, dict) and document.get("name") else ""
        if not problem and name in seen:
            problem = ("duplicate_name", f"tool {name!r} is also defined in {seen[name]}")
        if problem:
            out["errors"].append({"source": source, "name": name, "code": problem[0], "message": problem[1]})
            continue
        seen[name] = source
        for bucket, row in _seed_one(tenant=tenant, actor=actor, name=name, document=document):
            out[bucket].append({"source": source, **row})
    return out


def _seed_one(*, tenant: Tenant, actor: Any, name: str, document: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """One valid document: created (through the import path), updated in place, unchanged, or an error."""
    tool_type = str(document["type"]).upper()
    config = mask_config(tool_type, document.get("config") or {})  # secrets are never read from a file
    existing = Tool.objects.filter(tenant=tenant, name=name).first()
    if existing is None:
        report = tools_import(tenant=tenant, actor=actor, document={"format": EXPORT_FORMAT, "tools": [
            {**{k: document[k] for k in SEED_FIELDS if k in document}, "type": tool_type, "config": config}]})
        return [("created", row) for row in report["created"]] + [("errors", err) for err in report["errors"]]
    if existing.type != tool_type:
        return [("errors", {"name": name, "code": ApiCode.TYPE_CONFLICT,
                            "message": f"tenant already has a {existing.type} tool named {name!r}; "
                                       f"the file says {tool_type}"})]
    try:  # what the update would store: the file's structure over the stored secret values, validated
        stored_next = validate_config(tool_type, merge_masked(tool_type, stored=existing.config, incoming=config))
    except DomainError as exc:
        return [("errors", {"name": name, "code": exc.code, "message": exc.message})]
    wanted: dict[str, Any] = {"description": str(document.get("description") or ""),
                              "safety": document.get("safety") or existing.safety,
                              "requires_approval": bool(document.get("requires_approval", existing.requires_approval)),
                              "config": stored_next}
    current = {"description": existing.description, "safety": existing.safety,
               "requires_approval": existing.requires_approval, "config": existing.config}
    if wanted == current:
        return [("unchanged", {"id": existing.pk, "name": name})]
    try:
        with transaction.atomic():
            tool = tool_update(tenant=tenant, actor=actor, tool_id=existing.pk, changes=ToolInput(
                description=wanted["description"], safety=wanted["safety"],
                requires_approval=wanted["requires_approval"], config=config))
    except DomainError as exc:
        return [("errors", {"name": name, "code": exc.code, "message": exc.message})]
    return [("updated", {"id": tool.pk, "name": name, "changed": sorted(k for k in wanted if wanted[k] != current[k])})]


def _seed_problem(document: Any) -> tuple[str, str] | None:
    if not isinstance(document, dict):
        return "invalid_document", "a tool file holds one mapping (name, type, config, ...)"
    unknown = sorted(set(document) - set(SEED_FIELDS))
    if unknown:
        return "unknown_field", f"unknown field(s) {', '.join(unknown)}; accepted: {', '.join(SEED_FIELDS)}"
    if not document.get("name"):
        return "missing_field", "a tool needs a name"
    if str(document.get("type", "")).upper() not in IMPORTABLE_TYPES:
        return "invalid_type", f"type {document.get('type')!r} cannot be seeded; accepted: LOCAL, REMOTE, HTTP"
    if "config" in document and not isinstance(document["config"], dict):
        return "invalid_config", "config must be a mapping"
    return None
