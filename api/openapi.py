"""GET /openapi.json: OpenAPI 3.1 built by apispec from the same schemas that serialise responses."""
import json
from functools import lru_cache

from apispec import APISpec
from apispec.ext.marshmallow import MarshmallowPlugin
from flask import Blueprint, Response

from api import (alerts, checks, documents, free_time, organization, packing_lists, shipments, timeline,
                 versions)
from api.errors import REALM
from api.render import get_route
from api.schemas.common import ErrorSchema
from delivery import openapi as webhook_entries

bp = Blueprint("openapi", __name__)

TITLE = "Shipment Tracking API"

# Every operation, described next to its view as tuples of
# (operation id, path, summary, path parameter (name, prefix) or None, query schema or None, response schema).
OPERATIONS = (organization.OPERATIONS + shipments.OPERATIONS + timeline.OPERATIONS + free_time.OPERATIONS
              + documents.OPERATIONS + packing_lists.OPERATIONS + alerts.OPERATIONS + checks.OPERATIONS)
# Operations whose response is not JSON: (path, operations dict).
RAW_PATHS = (documents.RAW_PATH,)

ERROR_RESPONSES = {
    "400": "A parameter or header is invalid (`invalid_parameter`), or Service-Version names an "
           "unpublished version (`invalid_version`).",
    "401": "No token (`missing_token`), or a wrong, expired or revoked token (`invalid_token`).",
    "404": "No such object in this organization, or an unknown route (`resource_missing`).",
    "429": "A rate limit was hit (`rate_limited`); `Retry-After` gives seconds to wait.",
}


def _error(description):
    return {"description": description, "content": {"application/json": {"schema": "Error"}}}


def _operation(operation_id, summary, path_param, query_schema, response_schema):
    parameters = ["ServiceVersion"]
    if path_param:
        name, prefix = path_param
        parameters.append({"in": "path", "name": name, "required": True,
                           "schema": {"type": "string", "pattern": f"^{prefix}_[1-9][0-9]{{0,17}}$"},
                           "description": f"`{prefix}_<int>` id."})
    if query_schema is not None:
        parameters.append({"in": "query", "schema": query_schema})
    responses = {"200": {"description": "Success.", "headers": {"Service-Version": "ServiceVersion"},
                         "content": {"application/json": {"schema": response_schema}}}}
    responses.update({code: _error(text) for code, text in ERROR_RESPONSES.items()})
    return {"get": {"operationId": operation_id, "summary": summary, "parameters": parameters,
                    "responses": responses, "security": [{"bearer": ["read"]}]}}


@lru_cache(maxsize=1)
def build_spec():
    """The OpenAPI document as a dict (built once per process)."""
    spec = APISpec(title=TITLE, version=versions.LATEST, openapi_version="3.1.0",
                   plugins=[MarshmallowPlugin()],
                   info={"description": "Read-only access to an organization's shipments, plus signed webhooks. "
                                        "Every endpoint is GET and needs `Authorization: Bearer <token>`, "
                                        "except this document."})
    spec.components.security_scheme("bearer", {"type": "http", "scheme": "bearer",
                                               "description": f"Token `sv_` + 40 letters and digits; realm {REALM}."})
    spec.components.schema("Error", schema=ErrorSchema)
    for name, component in documents.COMPONENTS.items():
        spec.components.schema(name, schema=component)
    spec.components.parameter("ServiceVersion", "header", {
        "name": "Service-Version", "required": False,
        "schema": {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$", "enum": list(versions.PUBLISHED)},
        "description": "Version for this request only; defaults to the organization's pin."})
    spec.components.header("ServiceVersion", {"schema": {"type": "string"},
                                              "description": "The version the response was built for."})
    for operation_id, path, summary, path_param, query_schema, response_schema in OPERATIONS:
        spec.path(path=path, operations=_operation(operation_id, summary, path_param, query_schema,
                                                   response_schema))
    for path, operations in RAW_PATHS:
        spec.path(path=path, operations=operations)
    spec.path(path="/openapi.json", operations={"get": {
        "operationId": "get_openapi_document", "summary": "This description (no token needed).",
        "security": [], "responses": {"200": {"description": "OpenAPI 3.1 document.",
                                              "content": {"application/json": {"schema": {"type": "object"}}}},
                                      "429": _error(ERROR_RESPONSES["429"])}}})
    document = spec.to_dict()
    # OpenAPI 3.1 `webhooks`: one entry per event type (built in delivery/openapi.py).
    document["webhooks"] = dict(webhook_entries.WEBHOOKS)
    return document


@lru_cache(maxsize=1)
def _document_bytes():
    return json.dumps(build_spec(), separators=(",", ":")).encode()


@get_route(bp, "/openapi.json")
def get_openapi_document():
    """The machine-readable description; no token, cacheable for an hour."""
    return Response(_document_bytes(), mimetype="application/json",
                    headers={"Cache-Control": "public, max-age=3600"})
