"""What runs before every view: rate limits, the bearer token, the Service-Version header."""
from flask import current_app, g, request

from api import versions
from api.context import get_conn
from api.errors import InvalidParameter, InvalidToken, InvalidVersion, MissingToken, RateLimited
from models import organizations, rate_limits, tokens

# Endpoints that need no token (they still count toward the per-IP limit without a token).
PUBLIC_ENDPOINTS = {"openapi.get_openapi_document"}


def bearer_token():
    """The token of an `Authorization: Bearer` header, '' when it is there but malformed, else None."""
    header = request.headers.get("Authorization", "")
    scheme, _, value = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        return None
    return value.strip()


def guard_request():
    """Authenticate, count the request, and resolve the version; raises ApiError subclasses."""
    g.version = None
    token = bearer_token()
    principal = None
    if token is not None and tokens.TOKEN_PATTERN.fullmatch(token):
        principal = tokens.authenticate(get_conn(), token)
    enforce_rate_limits(principal)
    if request.routing_exception is not None or request.endpoint in PUBLIC_ENDPOINTS:
        return
    if token is None:
        raise MissingToken("No API token was sent. Send it as `Authorization: Bearer <ACCESS_TOKEN>`.")
    if principal is None:
        raise InvalidToken("The API token is invalid, expired or revoked, or its user left the organization.")
    g.principal = principal
    g.version = resolve_version(principal)


def enforce_rate_limits(principal):
    """Count this request; raise 429 when a limit of the spec is passed."""
    limits = current_app.config["RATE_LIMITS"]
    address = request.remote_addr or "unknown"
    if principal is not None:
        buckets = {f"token:{principal['token_id']}": limits["per_token"], f"ip:{address}": limits["per_ip"]}
    else:
        buckets = {f"anonymous:{address}": limits["anonymous_per_ip"]}
    counts = rate_limits.count_request(get_conn(), buckets, limits["window_seconds"])
    exceeded = [counts[bucket][1] for bucket, limit in buckets.items() if counts[bucket][0] > limit]
    if exceeded:
        raise RateLimited("Too many requests. Wait for the number of seconds in Retry-After, then retry.",
                          retry_after=max(exceeded))


def resolve_version(principal):
    """The version of this request: the Service-Version header, else the organization's pin."""
    requested = request.headers.get("Service-Version")
    if requested is not None:
        if not versions.VERSION_PATTERN.fullmatch(requested):
            raise InvalidParameter("Service-Version must be a date in the form YYYY-MM-DD.",
                                   param="Service-Version")
        if requested not in versions.PUBLISHED:
            raise InvalidVersion(f"Service-Version {requested} is not a published version; "
                                 f"published: {', '.join(versions.PUBLISHED)}.")
        return requested
    if principal["api_version"] is None:
        principal["api_version"] = organizations.pin_version(
            get_conn(), principal["organization_id"], versions.LATEST)
    return principal["api_version"]


def add_version_header(response):
    """Send Service-Version on responses built after the token and version were accepted."""
    if g.get("version") and not getattr(response, "unversioned", False):
        response.headers["Service-Version"] = g.version
    return response
