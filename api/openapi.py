"""GET /openapi.json: OpenAPI 3.1 built by apispec from app.url_map and the documentation on each view."""
import copy
import json

from apispec import APISpec
from apispec.ext.marshmallow import MarshmallowPlugin
from flask import Blueprint, Response, current_app

from api import observe
from api.apidoc import get_route, openapi_path, operation, view_doc
from api.errors import REALM
from api.params import parameter_attributes
from api.schemas.common import ErrorSchema
from api.webhook_description import SCHEMAS as WEBHOOK_SCHEMAS, SIGNATURE_SCHEME, WEBHOOKS, WEBHOOKS_TAG
from rendering import versions
from rendering.schemas.fields import OneOf

bp = Blueprint("openapi", __name__)

TITLE = "Shipment Tracking API"
# One tag per resource group, named by the blueprint its views are registered on (in this order).
_REFERENCE = ("Reference", "This description, for programs and for people; no token needed.")
TAGS = {
    "organization": ("Organization", "The organization the token belongs to, and the token itself."),
    "shipments": ("Shipments", "Shipments with their places, containers, labels, tracking state and cargo totals; "
                               "listed newest first, filtered and searched."),
    "timeline": ("Timeline", "A shipment's route legs, tracking events and ETA revisions."),
    "free_time": ("Free time", "Demurrage and detention clocks of ocean shipments, and the shipments whose "
                               "free days are about to run out."),
    "documents": ("Documents", "Current documents of a shipment, the data extracted from them and their files."),
    "packing_lists": ("Packing lists", "Current packing lists of a shipment with their pallets and lines."),
    "alerts": ("Alerts", "Open monitoring alerts across the organization's shipments."),
    "checks": ("Checks", "Results of the quality checks run on shipments."),
    "events": ("Events", "The last 30 days of the organization's webhook events, each exactly as it was (or will "
                         "be) sent: how a receiver catches up after downtime."),
    "changes": ("Changes", "The change feed: shipments in the order of their latest change, for keeping a copy "
                           "up to date (docs/sync.md)."),
    "openapi": _REFERENCE,
    "docs_page": _REFERENCE,
}
# Relative: the API answers at the root of the origin that serves this description (SPEC's {base_url}).
SERVERS = [{"url": "/", "description": "The origin serving this description."}]
# X-Request-Id (api/observe.py): the bounds within which a client's id is kept; a made id is inside them too.
REQUEST_ID_SCHEMA = {"type": "string", "minLength": 1, "maxLength": observe.REQUEST_ID_MAX_LENGTH,
                     "pattern": f"^{observe.SAFE_REQUEST_ID.pattern}$"}
_KEPT_REQUEST_ID = f"1 to {observe.REQUEST_ID_MAX_LENGTH} characters of `A-Z a-z 0-9 . _ -`"
_MADE_REQUEST_ID = f"{2 * observe.MADE_REQUEST_ID_BYTES} random lowercase hex digits"
# Key of app.extensions holding (document, its served bytes): built on first use, once per app.
EXTENSION = "shiptrack_openapi"
# Methods werkzeug adds to every GET rule; they are not operations of their own.
_IMPLICIT_METHODS = {"HEAD", "OPTIONS"}


class UndocumentedView(LookupError):
    """A rule of the url_map whose view carries no documentation, or a method other than GET."""


def documented_rules(app):
    """(OpenAPI path, rule, ViewDoc) for every rule but `static` and views left out; raises UndocumentedView."""
    found = []
    for rule in app.url_map.iter_rules():
        if rule.endpoint == "static":
            continue
        methods = set(rule.methods or ()) - _IMPLICIT_METHODS
        doc = view_doc(app.view_functions[rule.endpoint])
        if doc is None or methods != {"GET"}:
            raise UndocumentedView(f"{rule.rule} ({rule.endpoint}, {sorted(methods)}) has no documented GET view;"
                                   f" register it with api.apidoc.get_route")
        if doc.include_in_description:
            found.append((openapi_path(rule.rule), rule, doc))
    return found


def tag_of(rule):
    """The tag of a rule's operation: the one of the blueprint its view is registered on."""
    blueprint = rule.endpoint.rpartition(".")[0]
    if blueprint not in TAGS:
        raise UndocumentedView(f"{rule.rule} ({rule.endpoint}): blueprint {blueprint!r} has no tag in api.openapi.TAGS")
    return TAGS[blueprint][0]


def _new_spec():
    marshmallow_plugin = MarshmallowPlugin()
    spec = APISpec(title=TITLE, version=versions.LATEST, openapi_version="3.1.0",
                   plugins=[marshmallow_plugin], servers=SERVERS,
                   # No license file grants any right to this API or its description, and there is no
                   # SPDX identifier or URL to give (docs/decisions.md).
                   info={"license": {"name": "Proprietary"},
                         "description": "Read-only access to an organization's shipments, plus signed webhooks. "
                                        "Every endpoint is GET and needs `Authorization: Bearer <token>`, "
                                        "except this document and its page for people, `/docs`."})
    # style, explode and allowEmptyValue belong to the parameter, not its schema (api/params.py).
    marshmallow_plugin.converter.add_parameter_attribute_function(parameter_attributes)
    marshmallow_plugin.converter.add_attribute_function(one_of_property)
    for name, description in dict(TAGS.values()).items():
        spec.tag({"name": name, "description": description})
    spec.tag(WEBHOOKS_TAG)
    spec.components.security_scheme("bearer", {
        "type": "http", "scheme": "bearer",
        "description": f"Token `sv_` + 40 letters and digits; realm {REALM}. Its one scope, `read`, is what every "
                       "endpoint needs, and every token has it."})
    spec.components.security_scheme(*SIGNATURE_SCHEME)
    spec.components.schema("Error", schema=ErrorSchema)
    # Event bodies: referenced by the `webhooks` entries and by GET /events (api/webhook_description.py).
    for name, component in WEBHOOK_SCHEMAS.items():
        spec.components.schema(name, component=copy.deepcopy(component))
    spec.components.parameter("ServiceVersion", "header", {
        "name": "Service-Version", "required": False,
        "schema": {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$", "enum": list(versions.PUBLISHED)},
        "description": "Version for this request only; defaults to the organization's pin."})
    spec.components.parameter("IfNoneMatch", "header", {
        "name": "If-None-Match", "required": False, "schema": {"type": "string"},
        "description": "ETags of representations the client holds (RFC 9110: a comma-separated list, `W/` "
                       "prefixes allowed and compared weakly, or `*`): when one is the current `ETag`, the "
                       "answer is `304 Not Modified` without a body and is not counted against the rate limits but "
                       "against a budget of 304s ten times as large (`*` matches too, but is counted like any "
                       "request)."})
    spec.components.parameter("RequestId", "header", {
        "name": observe.HEADER, "required": False,
        # Every value is accepted (never a 400), so the schema admits any string; its first branch is
        # the one that is kept.
        "schema": {"type": "string", "anyOf": [{"title": "kept", **REQUEST_ID_SCHEMA},
                                               {"title": "replaced", "type": "string",
                                                "description": "Any other value: replaced by an id the service "
                                                               "makes."}]},
        "description": f"An id of your own for this request (a UUID, a trace id, a proxy's id), to find it in "
                       f"the service's logs: kept when it is {_KEPT_REQUEST_ID}. Any other value is not refused "
                       f"but replaced by an id the service makes ({_MADE_REQUEST_ID}); the response's "
                       f"`{observe.HEADER}` names the id used either way."})
    spec.components.header("ETag", {
        "schema": {"type": "string"},
        "description": "Strong validator of this response: a hash of the exact bytes sent and of the version "
                       "that shaped them (for a file, of the document's row: id, update time, size, storage "
                       "key, type and name). Send it back in `If-None-Match`."})
    spec.components.header("ServiceVersion", {"schema": {"type": "string"},
                                              "description": "The version the response was built for."})
    spec.components.header("RequestId", {
        "schema": dict(REQUEST_ID_SCHEMA),
        "description": f"The id of this request: the request's `{observe.HEADER}` when it was {_KEPT_REQUEST_ID}, "
                       f"else one the service made ({_MADE_REQUEST_ID}). Every log line written while the request "
                       f"was served names it: quote it in a support request."})
    # draft-ietf-httpapi-ratelimit-headers-11; both describe the limit closest to running out (api/guard.py).
    spec.components.header("RateLimitPolicy", {
        "schema": {"type": "string"},
        "description": "The rate limit closest to running out for this request, as a structured-field item: "
                       "policy name (`per_token`, `per_ip` or `anonymous_per_ip`, or on a 304 the budgets of "
                       "304s `not_modified_per_token` or `not_modified_anonymous_per_ip`), quota `q` in requests and "
                       "window `w` in seconds, e.g. `\"per_token\";q=600;w=300`."})
    spec.components.header("RateLimit", {
        "schema": {"type": "string"},
        "description": "What is left of that limit: the same policy name, the requests remaining `r` (this "
                       "request counted) and the seconds `t` until the window resets, e.g. "
                       "`\"per_token\";r=597;t=212`."})
    return spec


def one_of_property(converter, field, **kwargs):
    """apispec attribute function: a schemas.fields.OneOf item is `oneOf` references to its schemas."""
    if isinstance(field, OneOf):
        return {"oneOf": [converter.resolve_nested_schema(schema) for schema in field.schemas]}
    return {}


def _build(app):
    spec = _new_spec()
    rules = documented_rules(app)
    # Schemas a view's response names by $ref only (not through a Nested field) are registered up front.
    for _path, _rule, doc in rules:
        for component in doc.components:
            spec.components.schema(component.__name__.removesuffix("Schema"), schema=component)
    for path, rule, doc in rules:
        spec.path(path=path, operations={"get": {"tags": [tag_of(rule)], **operation(doc, rule.rule)}})
    document = spec.to_dict()
    require_every_property(document["components"]["schemas"])
    # OpenAPI 3.1 `webhooks`: one entry per event type (built in api/webhook_description.py).
    document["webhooks"] = dict(WEBHOOKS)
    return document


def require_every_property(schemas):
    """List every property of every schema (and inline object schema) as required, in place.

    The spec says every documented field is always present (null, never omitted), so the field
    lists of the schemas are the one source: nothing is marked field by field.
    """
    for schema in schemas.values():
        _require(schema)


def _require(schema):
    if not isinstance(schema, dict):
        return
    if "properties" in schema:
        schema["required"] = list(schema["properties"])
        for value in schema["properties"].values():
            _require(value)
    for key in ("items", "additionalProperties"):
        _require(schema.get(key))
    for key in ("anyOf", "oneOf", "allOf"):
        for value in schema.get(key, ()):
            _require(value)


def build_spec(app):
    """The OpenAPI document of `app` as a dict, built from its url_map once per app."""
    if EXTENSION not in app.extensions:
        document = _build(app)
        # Two first requests at once may both build it; the results are equal, so either may win.
        app.extensions[EXTENSION] = (document, json.dumps(document, separators=(",", ":")).encode())
    return app.extensions[EXTENSION][0]


@get_route(bp, "/openapi.json", {"type": "object"}, response_description="OpenAPI 3.1 document.", public=True)
def get_openapi_document():
    """This description (no token needed).

    The machine-readable description of the latest version, whatever the organization's pin or a
    `Service-Version` header say; cacheable for an hour (`Cache-Control: public, max-age=3600`).
    """
    app = current_app._get_current_object()
    build_spec(app)
    return Response(app.extensions[EXTENSION][1], mimetype="application/json",
                    headers={"Cache-Control": "public, max-age=3600"})
