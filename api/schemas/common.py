"""The error body and the list envelope."""
from marshmallow import Schema, fields

from rendering.schemas.fields import doc, enum


class ErrorDetailSchema(Schema):
    type = enum(("invalid_request_error", "authentication_error", "permission_error", "not_found_error",
                 "rate_limit_error", "api_error"), "Error family.")
    code = enum(("invalid_parameter", "invalid_version", "missing_token", "invalid_token", "insufficient_scope",
                 "resource_missing", "method_not_allowed", "request_too_large", "rate_limited", "internal_error",
                 "service_unavailable"),
                "What went wrong; branch on this.")
    message = fields.String(metadata=doc("An English sentence for people; not to be parsed."))
    param = fields.String(allow_none=True, metadata=doc("The offending parameter or header, or null."))


class ErrorSchema(Schema):
    error = fields.Nested(ErrorDetailSchema, metadata=doc("The error."))


def list_schema(item_schema, name):
    """A list envelope schema class whose `data` holds `item_schema` items."""
    return type(name, (Schema,), {
        "object": fields.Constant("list", metadata=doc("Always `list`.")),
        "data": fields.List(fields.Nested(item_schema), metadata=doc("The items.")),
        "has_more": fields.Boolean(metadata=doc("Whether another page follows.")),
    })
