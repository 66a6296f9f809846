"""The one error contract: {error: {type, code, message, param}}, produced here only."""
import logging

from flask import current_app, jsonify
from werkzeug.exceptions import HTTPException, MethodNotAllowed, NotFound, RequestEntityTooLarge

from api import metrics
from models import db

log = logging.getLogger(__name__)

REALM = "Shipment Tracking API"
UNKNOWN_ROUTE_MESSAGE = "Unrecognized request URL. See the API reference for the available paths."
# Retry-After of a 503 for a deadlock or serialization failure: the other transaction ends within a moment.
CONFLICT_RETRY_AFTER = 1


class ApiError(Exception):
    """Base of every error the API returns; subclasses fix status, type and code."""

    status = 400
    type = "invalid_request_error"
    code = "invalid_parameter"
    # Whether the response carries Service-Version (spec: not on 401, invalid_version, 429, unknown routes).
    versioned = True

    def __init__(self, message, param=None, headers=None):
        super().__init__(message)
        self.message = message
        self.param = param
        self.headers = dict(headers or {})

    def body(self):
        """The error body of the spec."""
        return {"error": {"type": self.type, "code": self.code,
                          "message": self.message, "param": self.param}}


class InvalidParameter(ApiError):
    """400: a parameter or header is invalid; `param` names it."""


class UnsupportedMediaType(InvalidParameter):
    """415: a request body of a type the endpoint does not read (POST /mcp reads application/json)."""

    status = 415
    versioned = False

    def __init__(self, message):
        super().__init__(message, param="Content-Type")


class InvalidVersion(ApiError):
    """400: Service-Version names an unpublished version."""

    code = "invalid_version"
    versioned = False

    def __init__(self, message):
        super().__init__(message, param="Service-Version")


class AuthenticationError(ApiError):
    """401: base for token problems; always carries WWW-Authenticate."""

    status = 401
    type = "authentication_error"
    versioned = False
    challenge_error = None

    def __init__(self, message):
        challenge = f'Bearer realm="{REALM}"'
        if self.challenge_error:
            challenge += f', error="{self.challenge_error}"'
        super().__init__(message, headers={"WWW-Authenticate": challenge})


class MissingToken(AuthenticationError):
    """401: no bearer token was sent."""

    code = "missing_token"


class InvalidToken(AuthenticationError):
    """401: the token is wrong, expired, revoked, or its user left the organization."""

    code = "invalid_token"
    challenge_error = "invalid_token"


class InsufficientScope(ApiError):
    """403: reserved by the spec; not raised today."""

    status = 403
    type = "permission_error"
    code = "insufficient_scope"


class ResourceMissing(ApiError):
    """404: no such object in this organization (or a malformed, foreign or wrong-prefix id)."""

    status = 404
    type = "not_found_error"
    code = "resource_missing"


class UnknownRoute(ResourceMissing):
    """404 for a path the API does not have; sent without Service-Version."""

    versioned = False


class MethodNotAllowedError(ApiError):
    """405: every endpoint of the API is GET (HEAD is answered as GET); /mcp is POST."""

    status = 405
    code = "method_not_allowed"
    versioned = False

    def __init__(self, allowed=("GET", "HEAD")):
        if "POST" in allowed:
            message = "Only POST is supported: /mcp takes one JSON-RPC message per request."
        else:
            message = "Only GET is supported; the API is read-only."
        super().__init__(message, headers={"Allow": ", ".join(allowed)})


class RequestTooLarge(ApiError):
    """413: the request body is larger than MAX_CONTENT_LENGTH; refused before it is read."""

    status = 413
    code = "request_too_large"
    versioned = False

    def __init__(self, limit):
        super().__init__(f"The request body is larger than {limit} bytes, the most this service reads. "
                         f"POST /mcp takes one JSON-RPC message; the API's GET requests take no body.")


class RateLimited(ApiError):
    """429: a rate limit was hit; Retry-After says how many seconds to wait."""

    status = 429
    type = "rate_limit_error"
    code = "rate_limited"
    versioned = False

    def __init__(self, message, retry_after):
        super().__init__(message, headers={"Retry-After": str(retry_after)})


class ServiceUnavailable(ApiError):
    """503: the database cannot be reached; Retry-After says when to try again (the service recovers by itself)."""

    status = 503
    type = "api_error"
    code = "service_unavailable"
    versioned = False

    def __init__(self, retry_after, message=None):
        super().__init__(message or f"The service cannot reach its database right now. Retry after the number of "
                                    f"seconds in Retry-After ({retry_after}).",
                         headers={"Retry-After": str(retry_after)})


def error_response(error):
    """Render an ApiError as the JSON response of the spec."""
    response = jsonify(error.body())
    response.status_code = error.status
    response.headers.update(error.headers)
    response.unversioned = not error.versioned
    return response


class InternalError(ApiError):
    """500: a bug on our side; the body never carries a stack trace."""

    status = 500
    type = "api_error"
    code = "internal_error"
    versioned = False


def _from_http_exception(exc):
    if exc.code and exc.code >= 500:
        return InternalError("Something went wrong on our side. Try again later.")
    if isinstance(exc, NotFound):
        return UnknownRoute(UNKNOWN_ROUTE_MESSAGE)
    if isinstance(exc, MethodNotAllowed):
        # HEAD is answered wherever GET is; OPTIONS never is (no CORS pre-flight).
        allowed = [method for method in ("GET", "HEAD", "POST") if method in (exc.valid_methods or ("GET",))]
        return MethodNotAllowedError(tuple(allowed))
    if isinstance(exc, RequestEntityTooLarge):
        # werkzeug's own refusal past MAX_CONTENT_LENGTH, should anything read request.data or a form.
        return RequestTooLarge(current_app.config["MAX_CONTENT_LENGTH"])
    error = InvalidParameter(exc.description or "The request could not be understood.")
    error.status = exc.code if exc.code and 400 <= exc.code < 500 else 400
    error.versioned = False
    return error


def _database_unavailable(error):
    metrics.DATABASE_ERRORS.labels("unavailable").inc()
    if isinstance(error, db.DatabaseSetupError):
        log.error("database setup error, answered 503 (a configuration to fix, not an outage): %s", error)
    else:
        log.warning("database unreachable, answered 503: %s", error)
    return error_response(ServiceUnavailable(current_app.config["DATABASE_RETRY_AFTER"]))


def conflict_refusal(error):
    """The 503 of a deadlock or serialization failure past the retries of the request's first statements
    (api.context.first_statements), or in a later statement: transient, so a 503 the client may retry."""
    metrics.DATABASE_ERRORS.labels("conflict").inc()
    log.warning("database conflict, answered 503: %s", db.describe(error))
    return ServiceUnavailable(CONFLICT_RETRY_AFTER, "The request met a conflicting change in the database and was "
                                                    "not completed. Retry after the number of seconds in "
                                                    f"Retry-After ({CONFLICT_RETRY_AFTER}).")


def _database_conflict(error):
    return error_response(conflict_refusal(error))


def _statement_error(error):
    # The database being away comes as DatabaseUnavailable (models/cursors.py translates every call of the
    # driver's): a statement's error is a bug, counted, and stays a 500.
    metrics.DATABASE_ERRORS.labels("statement").inc()
    raise error


def register_error_handlers(app):
    """Route every ApiError, werkzeug HTTPException and lost database through error_response."""
    app.register_error_handler(ApiError, error_response)
    app.register_error_handler(HTTPException, lambda exc: error_response(_from_http_exception(exc)))
    app.register_error_handler(db.DatabaseUnavailable, _database_unavailable)
    for conflict in db.TransientConflict:  # more specific than db.Error, so chosen before it
        app.register_error_handler(conflict, _database_conflict)
    app.register_error_handler(db.Error, _statement_error)


# The words of a 429 (api/guard.py raises it).

def anonymous_limit_message(limits, retry_after, failed_authentication):
    """The 429 message past the budget without a valid token: a bare 429 would hide a bad token."""
    if failed_authentication:
        cause = ("Too many failed authentications from this address: the API token sent is invalid, expired "
                 "or revoked, or its user left the organization, and")
    else:
        cause = "Too many requests without a valid API token from this address:"
    return (f"{cause} requests without a valid token (failed authentications included) are limited to "
            f"{limits['anonymous_per_ip']} per {_duration(limits['window_seconds'])} per address. "
            f"The count resets in {_duration(retry_after, in_minutes=False)} (Retry-After).")


def not_modified_message(policy, limits, budget_quota, retry_after):
    """The 429 message past a 304 budget (of `budget_quota`): which budget ran out, and that the request limit is
    not the one."""
    owner = "this token" if policy == "per_token" else "this address without a valid token"
    return (f"Too many 304 Not Modified answers for {owner}: they are not counted against its limit of "
            f"{limits[policy]} requests, but are limited to {budget_quota} per "
            f"{_duration(limits['window_seconds'])} (not_modified_{policy}). "
            f"The count resets in {_duration(retry_after, in_minutes=False)} (Retry-After).")


def _duration(seconds, in_minutes=True):
    if in_minutes and seconds % 60 == 0:
        return f"{seconds // 60} minute{'' if seconds == 60 else 's'}"
    return f"{seconds} second{'' if seconds == 1 else 's'}"
