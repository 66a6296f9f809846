"""Organization and the token that made the request."""
from marshmallow import Schema, fields

from rendering.schemas.fields import Id, UtcDateTime, doc, enum


class TokenSchema(Schema):
    id = Id("tok")
    name = fields.String(metadata=doc("Name given when the token was created."))
    scopes = fields.List(enum(("read",), "Scope."), metadata=doc("Scopes; today the only value is `read`."))
    expires_at = UtcDateTime(allow_none=True, metadata=doc("Expiry, or null when it never expires."))
    user_email = fields.String(metadata=doc("E-mail of the token's user."))


class OrganizationSchema(Schema):
    object = fields.Constant("organization", metadata=doc("Always `organization`."))
    id = Id("org")
    name = fields.String(metadata=doc("Display name."))
    slug = fields.String(metadata=doc("Slug used in the application."))
    api_version = fields.String(allow_none=True, metadata=doc(
        "Pinned version; null only if the organization has never made a request without the version header."))
    token = fields.Nested(TokenSchema, metadata=doc("The token that made the request."))
