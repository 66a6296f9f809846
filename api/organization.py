"""GET /organization: the organization and the token that asks."""
from flask import Blueprint

from api.apidoc import get_route
from api.context import principal
from api.responses import resource
from rendering.schemas.organization import OrganizationSchema

bp = Blueprint("organization", __name__)

@get_route(bp, "/organization", OrganizationSchema)
def get_organization():
    """The organization and the token making the request.

    `api_version` is the version the organization is pinned to: null until its first request without
    a `Service-Version` header. `token` is the token that made this request, with its user's e-mail.
    """
    who = principal()
    organization = {
        "id": who["organization_id"], "name": who["organization_name"], "slug": who["slug"],
        "api_version": who["api_version"],
        "token": {"id": who["token_id"], "name": who["token_name"], "scopes": who["scopes"],
                  "expires_at": who["expires_at"], "user_email": who["user_email"]},
    }
    return resource("organization", OrganizationSchema, organization)

