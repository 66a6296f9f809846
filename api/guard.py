"""What runs before every view: who asks, rate limits, the size of the body, the Service-Version header.

The guard decides every request before its view runs, on every route; views only read. On a warm process
it asks the database nothing: the principal of a token is kept per process (models/principals.py) and
requests are counted from reservations of the shared limits (models/rate_limits.py).
"""
import dataclasses
from dataclasses import dataclass
from datetime import datetime, timezone

from flask import current_app, g, request

from api.context import database, first_statements, primary_conn, standbys
from api.errors import (InvalidParameter, InvalidToken, InvalidVersion, MissingToken, RateLimited, RequestTooLarge,
                        anonymous_limit_message, not_modified_message)
from models import breaker, db, deadline, organizations, principals, rate_limits, tokens
from rendering import versions

# Endpoints that need no token (they still count toward the per-IP limit without a token).
PUBLIC_ENDPOINTS = {"openapi.get_openapi_document", "docs_page.get_docs_page", "docs_page.get_docs_asset"}
# Public endpoints never counted: the /docs page and its files, bytes the process holds. A cold load of the
# page fetches five of them besides /openapi.json (which counts, as the specification says): counted, they
# spent the budget without a token in five loads, and the page then showed a 429 of its own files.
UNCOUNTED_ENDPOINTS = {"docs_page.get_docs_page", "docs_page.get_docs_asset"}
# WSGI environ key of a request made inside another one that was authenticated and counted for it (the
# GET an MCP tool call makes: mcp_server/http.py). Only code in this process can set it: a client's
# headers reach the environ as HTTP_* keys.
COUNTED_BY = "shiptrack.counted_by"
# The 304 budget of a request limit: its policy is this prefix and the limit's name, its bucket this prefix
# and the limit's bucket. A RATE_LIMITS setting written without one gets NOT_MODIFIED_TIMES the limit.
NOT_MODIFIED = "not_modified_"
NOT_MODIFIED_TIMES = 10
# The longest the statements of a public request wait for the database (where a deadline is kept: gunicorn's
# workers, models/deadline.py): the description and its page are bytes the process holds.
PUBLIC_WAIT_SECONDS = 0.5


@dataclass(frozen=True, slots=True)
class LimitState:
    """Where a request stands in one limit: its policy and quota, requests left (below 0: refused), seconds to reset."""

    policy: str
    quota: int
    remaining: int
    resets_in: int


@dataclass(frozen=True, slots=True)
class Authentication:
    """Who asks (the principal, None without a valid token), the buckets counted ({bucket: policy}) and where
    the request stands in each (a LimitState of each, in the same order)."""

    principal: dict | None
    policies: dict
    states: list


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
    g.rate_limit = None
    g.authentication = None
    token = bearer_token()
    public = request.routing_exception is None and request.endpoint in PUBLIC_ENDPOINTS
    # The description and its page need no database: while it is away, or taken for not answering
    # (models/breaker.py), they are served at once, uncounted (no RateLimit headers); everything else
    # is 503 (docs/authentication.md).
    if public and (breaker.is_open() or request.endpoint in UNCOUNTED_ENDPOINTS):
        return
    authentication = request.environ.get(COUNTED_BY)
    if authentication is None:
        try:
            with deadline.within(PUBLIC_WAIT_SECONDS if public else None):
                authentication = authenticate_and_count(token)
        except db.DatabaseUnavailable:
            if public:
                return
            raise
    g.authentication = authentication
    principal = authentication.principal
    enforce_rate_limits(authentication, failed_authentication=token is not None and principal is None)
    # Refused on its Content-Length alone, before anything reads the body, on every path (a body streamed
    # without one is counted as /mcp reads it: mcp_server/http.read_message).
    max_content_length = current_app.config["MAX_CONTENT_LENGTH"]
    if (request.content_length or 0) > max_content_length:
        raise RequestTooLarge(max_content_length)
    if request.routing_exception is not None or public:
        return
    if token is None:
        raise MissingToken("No API token was sent. Send it as `Authorization: Bearer <ACCESS_TOKEN>`.")
    if principal is None:
        raise InvalidToken("The API token is invalid, expired or revoked, or its user left the organization.")
    g.principal = principal
    g.version = requested_version() or pinned_version(principal)
    write_last_uses(principal)


def authenticate_and_count(token):
    """The request's Authentication: its principal, and the request counted in each of its buckets.

    On a warm process both come from memory; a statement is sent only for a principal not kept (or kept
    too long) and for a bucket this process holds no reservation of (models/rate_limits.py).
    """
    found = None
    if token is not None and tokens.TOKEN_PATTERN.fullmatch(token):
        found = kept_principals().get(tokens.fingerprint(token), look_up)
    address = request.remote_addr or "unknown"
    if found is not None:
        policies = {f"token:{found['token_id']}": "per_token", f"ip:{address}": "per_ip"}
    else:
        policies = {f"anonymous:{address}": "anonymous_per_ip"}
    limits = current_app.config["RATE_LIMITS"]
    standings, _admitted = reservations().admit({bucket: quota(limits, policy) for bucket, policy in policies.items()},
                                                reserve)
    states = [LimitState(policy, standings[bucket].quota, standings[bucket].remaining, standings[bucket].resets_in)
              for bucket, policy in policies.items()]
    return Authentication(found, policies, states)


def look_up(fingerprint):
    """The principal of a token fingerprint, read now (the first statement; on a standby while the primary is away)."""
    return first_statements(lambda conn: tokens.principal(conn, fingerprint), read=True)


def reserve(wanted):
    """models.rate_limits.reserve on the request's connection."""
    window = current_app.config["RATE_LIMITS"]["window_seconds"]
    return first_statements(lambda conn: rate_limits.reserve(conn, wanted, window))


def kept_principals():
    """The principals this application keeps (models.principals.Principals), made on first use."""
    kept = current_app.extensions.get("principals")
    if kept is None:
        config = current_app.config
        target = database()
        if config["DATABASE_LISTEN_URL"]:
            target = db.Target.from_config({**config, "DATABASE_POOLER": None}, "api", url=config["DATABASE_LISTEN_URL"])
        # Its own name, so that operators tell it from the pooled connections (pg_stat_activity).
        target = dataclasses.replace(target, application_name=principals.APPLICATION_NAME)
        kept = current_app.extensions["principals"] = principals.Principals(principals.listener(target))
    return kept


def reservations():
    """This application's reservations of the rate limits (models.rate_limits.Reservations), made on first use;
    with standbys, counted alone while the primary is away (docs/authentication.md)."""
    held = current_app.extensions.get("rate_limits")
    if held is None:
        window = current_app.config["RATE_LIMITS"]["window_seconds"]
        held = current_app.extensions["rate_limits"] = rate_limits.Reservations(window, alone=standbys() is not None)
    return held


def write_last_uses(principal):
    """Note the token's use; write the uses noted when they are due (models.principals.LAST_USE_SECONDS).

    A write that fails is dropped, not retried: a last use is a hint (a minute's resolution), never a reason
    to refuse a request.
    """
    kept = kept_principals()
    kept.used(principal["token_id"], datetime.now(timezone.utc))
    due = kept.last_uses()
    if due is None:
        return
    try:
        principals.record_last_uses(primary_conn(), due)
    except (db.DatabaseUnavailable, *db.TransientConflict):
        pass


def enforce_rate_limits(authentication, failed_authentication=False):
    """Raise 429 when the request was refused by a limit of the spec (a bucket whose window is spent).

    Keeps the limit closest to running out in `g.rate_limit` for the RateLimit headers of the response.
    """
    limits = current_app.config["RATE_LIMITS"]
    states = authentication.states
    g.rate_limit = closest_limit(states)
    exceeded = [state.resets_in for state in states if state.remaining < 0]
    if not exceeded:
        return
    retry_after = max(exceeded)
    if authentication.principal is None:
        raise RateLimited(anonymous_limit_message(limits, retry_after, failed_authentication),
                          retry_after=retry_after)
    raise RateLimited("Too many requests. Wait for the number of seconds in Retry-After, then retry.",
                      retry_after=retry_after)


def quota(limits, policy):
    """The requests `policy` allows per window (RATE_LIMITS); a 304 budget left out is NOT_MODIFIED_TIMES its limit."""
    if policy in limits or not policy.startswith(NOT_MODIFIED):
        return limits[policy]
    return NOT_MODIFIED_TIMES * limits[policy.removeprefix(NOT_MODIFIED)]


def closest_limit(states):
    """The LimitState closest to running out, its remaining never below 0 (what the RateLimit headers show)."""
    # Fewest left first, so a 429 shows a limit it passed; on a tie the later reset (t never before Retry-After).
    closest = min(states, key=lambda state: (state.remaining, -state.resets_in))
    return LimitState(closest.policy, closest.quota, max(0, closest.remaining), closest.resets_in)


def count_not_modified():
    """Count this request (answered 304 Not Modified) in its 304 budget instead of its limits.

    Returns the RateLimited to answer instead when that budget is spent (the request then stays counted
    in its limits), else None. Like the count before the view, this is done in memory, from reservations.
    """
    counted = g.get("authentication")
    if counted is None or request.environ.get(COUNTED_BY) is counted:
        return None
    policies = counted.policies
    limits = current_app.config["RATE_LIMITS"]
    # The token's bucket, or the address's without a valid token: per_ip only ever comes with per_token.
    bucket, policy = next((bucket, policy) for bucket, policy in policies.items() if policy != "per_ip")
    budget_policy = NOT_MODIFIED + policy
    budget_quota = quota(limits, budget_policy)
    try:
        standings, admitted = reservations().admit({NOT_MODIFIED + bucket: budget_quota}, reserve)
    except (db.DatabaseUnavailable, *db.TransientConflict):
        # The 304 is still right; the database went away after the view (or a conflict ended the
        # reservation), so the request stays counted in its limits.
        return None
    budget = standings[NOT_MODIFIED + bucket]
    budget_state = LimitState(budget_policy, budget_quota, budget.remaining, budget.resets_in)
    if not admitted:
        g.rate_limit = closest_limit([budget_state])
        return RateLimited(not_modified_message(policy, limits, budget_quota, budget.resets_in), retry_after=budget.resets_in)
    held = reservations()
    held.give_back(policies)
    given_back = [held.standing(each, quota(limits, each_policy)) for each, each_policy in policies.items()]
    g.rate_limit = closest_limit([LimitState(each_policy, standing.quota, standing.remaining, standing.resets_in)
                                  for each_policy, standing in zip(policies.values(), given_back)] + [budget_state])
    return None


def add_rate_limit_headers(response):
    """RateLimit-Policy and RateLimit (draft-ietf-httpapi-ratelimit-headers-11) on every counted request.

    A 503 is not counted, wherever the database failed it: it has neither.

    Both describe one policy, the one closest to running out: `"per_token";q=600;w=300` and
    `"per_token";r=597;t=212` (quota, window, remaining and seconds until the window resets).
    """
    state = g.get("rate_limit")
    if response.status_code == 503 and state is not None:
        # The database failed the view: the request is given back, as a 503 of the guard counts nothing.
        authentication = g.get("authentication")
        if authentication is not None and request.environ.get(COUNTED_BY) is not authentication:
            reservations().give_back(authentication.policies)
        return response
    if state is not None:
        window = current_app.config["RATE_LIMITS"]["window_seconds"]
        response.headers["RateLimit-Policy"] = f'"{state.policy}";q={state.quota};w={window}'
        response.headers["RateLimit"] = f'"{state.policy}";r={state.remaining};t={state.resets_in}'
    return response


def requested_version():
    """The published version the Service-Version header names, None without the header; raises on any other."""
    requested = request.headers.get("Service-Version")
    if requested is None:
        return None
    if not versions.VERSION_PATTERN.fullmatch(requested):
        raise InvalidParameter("Service-Version must be a date in the form YYYY-MM-DD.", param="Service-Version")
    if requested not in versions.PUBLISHED:
        raise InvalidVersion(f"Service-Version {requested} is not a published version; "
                             f"published: {', '.join(versions.PUBLISHED)}.")
    return requested


def pinned_version(principal):
    """The organization's pinned version, pinning it to the latest first when it has none (docs/parameters.md).

    The pin is a statement of its own (models.organizations.pin_version), sent only while the organization
    has no pin: every later request finds it in the token's row.
    """
    if principal["api_version"] is None:
        # Another request may pin it meanwhile: the statement keeps the pin it finds and returns it.
        principal["api_version"] = organizations.pin_version(primary_conn(), principal["organization_id"],
                                                             versions.LATEST)
    return principal["api_version"]


def add_version_header(response):
    """Send Service-Version on responses built after the token and version were accepted."""
    if g.get("version") and not getattr(response, "unversioned", False):
        response.headers["Service-Version"] = g.version
    return response
