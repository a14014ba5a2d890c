"""SCIM 2.0 at /scim/v2/ (RFC 7643/7644): the bearer token decides the tenant; Users, Groups and discovery.

Bodies are parsed, patched, filtered and written by scim2-models; rows are written by scim.provisioning. The routes
are in identity_app.scim.urls, which imports this module (and scim2-models with it) at the first SCIM request."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt
from pydantic import ValidationError
from scim2_models import (
    AuthenticationScheme,
    Bulk,
    ChangePassword,
    Context,
    Error,
    ETag,
    Filter,
    Group,
    ListResponse,
    Patch,
    PatchOp,
    ResourceType,
    ResponseParameters,
    Schema,
    SCIMException,
    ScimFilter,
    Sort,
    User,
)
from scim2_models import ServiceProviderConfig as SPC

from core.links import public_url
from identity_app import selectors
from identity_app.models import ScimToken
from identity_app.scim import provisioning as p

CONTENT_TYPE = "application/scim+json"
MAX_RESULTS = 200
Handler = Callable[..., HttpResponse]


@functools.cache
def parametrized(generic: Any, argument: Any) -> Any:
    """`generic[argument]` (ListResponse[User], PatchOp[Group], ...), made once per process and kept. Pydantic caches
    a parametrized model only while something refers to it (a weak dictionary): without this reference every list
    or patch request built its model class again (~5-20 ms of CPU each, most of it reading the fields' docstrings
    from source), and so did scim2-client in the same process."""
    return generic[argument]


def base_url() -> str:
    return public_url("/scim/v2").rstrip("/")


def _json(body: Any, status: int = 200, *, location: str | None = None) -> HttpResponse:
    response = HttpResponse(json.dumps(body), status=status, content_type=CONTENT_TYPE)
    if location:
        response["Location"] = location
    return response


def _error(status: int, detail: str, scim_type: str | None = None) -> HttpResponse:
    return _json(Error(status=status, detail=detail, scim_type=scim_type).model_dump(), status)


def _authenticated(request: HttpRequest) -> ScimToken | None:
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer":
        return None
    row = selectors.scim_token_lookup(token=token.strip())
    if row is not None:
        ScimToken.objects.filter(pk=row.pk).update(last_used_at=timezone.now())
    return row


def _body(request: HttpRequest) -> Any:
    try:
        return json.loads(request.body or b"null")
    except ValueError:
        raise p.ScimProblem(400, "the body is not JSON", "invalidSyntax") from None


def _parse(model: Any, body: Any, ctx: Context) -> Any:
    if not isinstance(body, dict):
        raise p.ScimProblem(400, "the body must be a JSON object", "invalidSyntax")
    try:
        return model.model_validate(body, scim_ctx=ctx)
    except SCIMException as exc:
        raise p.ScimProblem(exc.status, str(exc), exc.scim_type or None) from None
    except ValidationError as exc:
        first: dict[str, Any] = dict(exc.errors()[0]) if exc.errors() else {}
        where = ".".join(str(x) for x in first.get("loc", ()))
        scim_type = (first.get("ctx") or {}).get("scim_type") or "invalidValue"
        status = int((first.get("ctx") or {}).get("status") or 400)
        raise p.ScimProblem(status, f"{where}: {first.get('msg', 'invalid')}"[:300], scim_type) from None


def _dump(resource: Any, ctx: Context, request: HttpRequest, query: Any = None) -> Any:
    query = request.GET if query is None else query
    attributes = [a.strip() for a in (query.get("attributes") or "").split(",") if a.strip()] or None
    excluded = [a.strip() for a in (query.get("excludedAttributes") or "").split(",") if a.strip()] or None
    if attributes is None and excluded is None:
        return resource.model_dump(scim_ctx=ctx)
    try:
        params: Any = ResponseParameters.model_validate({"attributes": attributes, "excludedAttributes": excluded})
    except (SCIMException, ValidationError):
        raise p.ScimProblem(400, "attributes/excludedAttributes name no attribute path", "invalidPath") from None
    return resource.model_dump(scim_ctx=ctx, response_parameters=params)


# --- discovery -----------------------------------------------------------------------------------------------


def service_provider_config() -> SPC:
    return SPC(
        documentation_uri=None,
        patch=Patch(supported=True),
        bulk=Bulk(supported=False, max_operations=0, max_payload_size=0),
        filter=Filter(supported=True, max_results=MAX_RESULTS),
        change_password=ChangePassword(supported=False),
        sort=Sort(supported=False),
        etag=ETag(supported=False),
        authentication_schemes=[AuthenticationScheme(
            type=AuthenticationScheme.Type.oauthbearertoken, name="Bearer token",
            description="A tenant's SCIM token (POST /api/v1/scim-tokens/), as Authorization: Bearer <token>",
            primary=True,
        )],
    )


def resource_types() -> list[ResourceType]:
    return [ResourceType.from_resource(User), ResourceType.from_resource(Group)]


def _meta(obj: Any, kind: str, ident: str) -> Any:
    from scim2_models import Meta

    obj.meta = Meta(resource_type=kind, location=f"{base_url()}/{kind}s/{ident}")
    return obj


def spc_view(request: HttpRequest, token: ScimToken) -> HttpResponse:
    config = service_provider_config()
    config.meta = _spc_meta()
    return _json(config.model_dump(scim_ctx=Context.RESOURCE_QUERY_RESPONSE))


def _spc_meta() -> Any:
    from scim2_models import Meta

    return Meta(resource_type="ServiceProviderConfig", location=f"{base_url()}/ServiceProviderConfig")


def resource_types_view(request: HttpRequest, token: ScimToken, ident: str | None = None) -> HttpResponse:
    types = [_meta(t, "ResourceType", str(t.id)) for t in resource_types()]
    if ident is not None:
        found = next((t for t in types if t.id == ident), None)
        if found is None:
            return _error(404, f"no resource type {ident!r}")
        return _json(found.model_dump(scim_ctx=Context.RESOURCE_QUERY_RESPONSE))
    listed = parametrized(ListResponse, ResourceType)(total_results=len(types), start_index=1,
                                                      items_per_page=len(types), resources=types)
    return _json(listed.model_dump(scim_ctx=Context.SEARCH_RESPONSE))


def schemas_view(request: HttpRequest, token: ScimToken, ident: str | None = None) -> HttpResponse:
    schemas = [_meta(m.to_schema(), "Schema", m.__schema__) for m in (User, Group)]
    if ident is not None:
        found = next((s for s in schemas if s.id == ident), None)
        if found is None:
            return _error(404, f"no schema {ident!r}")
        return _json(found.model_dump(scim_ctx=Context.RESOURCE_QUERY_RESPONSE))
    listed = parametrized(ListResponse, Schema)(total_results=len(schemas), start_index=1,
                                                items_per_page=len(schemas), resources=schemas)
    return _json(listed.model_dump(scim_ctx=Context.SEARCH_RESPONSE))


# --- resources -----------------------------------------------------------------------------------------------


class Kind:
    """What differs between /Users and /Groups."""

    def __init__(self, model: Any, rows: Callable[..., Any], get: Callable[..., Any], to_resource: Callable[..., Any],
                 create: Callable[..., Any], replace: Callable[..., Any], delete: Callable[..., Any], name: str) -> None:
        self.model, self.rows, self.get, self.to_resource = model, rows, get, to_resource
        self.create, self.replace, self.delete, self.name = create, replace, delete, name


USERS = Kind(User, selectors.scim_user_list, selectors.scim_user_get, p.user_resource, p.user_create, p.user_replace,
             p.user_delete, "Users")
GROUPS = Kind(Group, selectors.scim_group_list, selectors.scim_group_get, p.group_resource, p.group_create,
              p.group_replace, p.group_delete, "Groups")


def _int_param(params: Any, name: str, default: int) -> int:
    try:
        return int(params.get(name, default))
    except (TypeError, ValueError):
        raise p.ScimProblem(400, f"{name} must be an integer", "invalidValue") from None


def _search(request: HttpRequest, token: ScimToken, kinds: list[Kind], params: Any) -> HttpResponse:
    """List, filter (scim2-models evaluates the filter on each resource) and page one or several resource types."""
    base = base_url()
    resources: list[Any] = []
    expression = params.get("filter")
    for kind in kinds:
        found = [kind.to_resource(row, base=base) for row in kind.rows(tenant=token.tenant)]
        if expression:
            try:
                bound: Any = parametrized(ScimFilter, kind.model)(expression)
                found = [r for r in found if bound.match(r)]
            except (SCIMException, ValueError, TypeError) as exc:
                if len(kinds) > 1:
                    continue  # a root search: a filter naming what this type lacks matches none of it
                raise p.ScimProblem(400, f"filter: {exc}"[:300], "invalidFilter") from None
        resources += found
    start = max(1, _int_param(params, "startIndex", 1))
    count = min(max(0, _int_param(params, "count", MAX_RESULTS)), MAX_RESULTS)
    page = resources[start - 1:start - 1 + count]
    # The resource type(s) of the list, known only at run time (one endpoint's, or both at the root .search).
    models: Any = kinds[0].model if len(kinds) == 1 else User | Group
    listed_type: Any = parametrized(ListResponse, models)
    listed = listed_type(total_results=len(resources), start_index=start, items_per_page=len(page), resources=page)
    attributes = params.get("attributes")
    excluded = params.get("excludedAttributes")
    query = {"attributes": ",".join(attributes) if isinstance(attributes, list) else attributes or "",
             "excludedAttributes": ",".join(excluded) if isinstance(excluded, list) else excluded or ""}
    return _json(_dump(listed, Context.SEARCH_RESPONSE, request, query))


def _search_post(request: HttpRequest, token: ScimToken, kinds: list[Kind]) -> HttpResponse:
    """POST .../.search (RFC 7644 §3.4.3): the query in a SearchRequest body."""
    body = _body(request)
    if not isinstance(body, dict):
        raise p.ScimProblem(400, "the body must be a SearchRequest object", "invalidSyntax")
    return _search(request, token, kinds, body)


def _collection(request: HttpRequest, token: ScimToken, kind: Kind) -> HttpResponse:
    if request.method == "POST":
        resource = _parse(kind.model, _body(request), Context.RESOURCE_CREATION_REQUEST)
        row = kind.create(tenant=token.tenant, resource=resource)
        out = kind.to_resource(kind.get(tenant=token.tenant, scim_id=row.pk), base=base_url())
        return _json(_dump(out, Context.RESOURCE_CREATION_RESPONSE, request), 201, location=str(out.meta.location))
    return _search(request, token, [kind], request.GET)


def _single(request: HttpRequest, token: ScimToken, kind: Kind, ident: str) -> HttpResponse:
    tenant, base = token.tenant, base_url()
    row = kind.get(tenant=tenant, scim_id=ident)
    if request.method == "GET":
        return _json(_dump(kind.to_resource(row, base=base), Context.RESOURCE_QUERY_RESPONSE, request))
    if request.method == "DELETE":
        kind.delete(tenant=tenant, row=row)
        return HttpResponse(status=204)
    if request.method == "PUT":
        resource = _parse(kind.model, _body(request), Context.RESOURCE_REPLACEMENT_REQUEST)
        row = kind.replace(tenant=tenant, row=row, resource=resource)
    else:  # PATCH
        patch = _parse(parametrized(PatchOp, kind.model), _body(request), Context.RESOURCE_PATCH_REQUEST)
        resource = kind.to_resource(row, base=base)
        try:
            patch.patch(resource)
        except SCIMException as exc:
            raise p.ScimProblem(exc.status, str(exc)[:300], exc.scim_type or None) from None
        row = kind.replace(tenant=tenant, row=row, resource=resource, op="patch")
    row = kind.get(tenant=tenant, scim_id=row.pk)
    return _json(_dump(kind.to_resource(row, base=base), Context.RESOURCE_REPLACEMENT_RESPONSE, request))


def _guarded(handler: Handler, methods: tuple[str, ...]) -> Handler:
    @csrf_exempt
    def view(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        token = _authenticated(request)
        if token is None:
            response = _error(401, "a valid SCIM bearer token is required")
            response["WWW-Authenticate"] = 'Bearer realm="scim"'
            return response
        if request.method not in methods:
            return _error(405, f"{request.method} is not allowed here; allowed: {', '.join(methods)}")
        try:
            return handler(request, token, *args, **kwargs)
        except p.ScimProblem as exc:
            return _error(exc.status, exc.detail, exc.scim_type)
        except Exception as exc:
            from core.errors import DomainError

            if isinstance(exc, DomainError):
                return _error(exc.status, exc.message)
            raise

    return view


def _unknown(request: HttpRequest, token: ScimToken, rest: str) -> HttpResponse:
    return _error(404, f"no SCIM endpoint at /scim/v2/{rest[:100]}")


READ = ("GET",)
# Each SCIM route's view by name (identity_app.scim.urls routes to them; it imports this module at the first request).
VIEWS: dict[str, Handler] = {
    "service_provider_config": _guarded(spc_view, READ),
    "resource_types": _guarded(resource_types_view, READ),
    "schemas": _guarded(schemas_view, READ),
    "search": _guarded(lambda r, t: _search_post(r, t, [USERS, GROUPS]), ("POST",)),
    "users_search": _guarded(lambda r, t: _search_post(r, t, [USERS]), ("POST",)),
    "groups_search": _guarded(lambda r, t: _search_post(r, t, [GROUPS]), ("POST",)),
    "users": _guarded(lambda r, t: _collection(r, t, USERS), ("GET", "POST")),
    "user": _guarded(lambda r, t, ident: _single(r, t, USERS, ident), ("GET", "PUT", "PATCH", "DELETE")),
    "groups": _guarded(lambda r, t: _collection(r, t, GROUPS), ("GET", "POST")),
    "group": _guarded(lambda r, t, ident: _single(r, t, GROUPS, ident), ("GET", "PUT", "PATCH", "DELETE")),
    "unknown": _guarded(_unknown, ("GET", "POST", "PUT", "PATCH", "DELETE")),
}
