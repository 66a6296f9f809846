"""What runs before every view: rate limits, the size of the body, the bearer token, the Service-Version header."""
from dataclasses import dataclass

from flask import current_app, g, request

from rendering import versions
from api.context import first_statements, get_conn
from api.errors import InvalidParameter, InvalidToken, InvalidVersion, MissingToken, RateLimited, RequestTooLarge
from models import breaker, db, deadline, organizations, rate_limits, tokens

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
# Endpoints whose view sends the token check and count in its own first statement, with its page (one round
# trip: docs/serving.md). guard_request leaves the count to the view (complete) when nothing can refuse the
# request before the count does: a well-formed token, no body, a Service-Version absent or published.
ONE_TRIP_ENDPOINTS = frozenset({"shipments.list_shipments", "shipments.get_shipment"})
# The longest the count of a public request waits for the database (where a deadline is kept: gunicorn's
# workers, models/deadline.py): the description and its page are bytes the process holds.
PUBLIC_WAIT_SECONDS = 0.5


@dataclass(frozen=True, slots=True)
class LimitState:
    """Where a request stands in one limit: its policy and quota, requests left (below 0 past it), seconds to reset."""

    policy: str
    quota: int
    remaining: int
    resets_in: int


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
    g.rate_limit_counted = None
    token = bearer_token()
    public = request.routing_exception is None and request.endpoint in PUBLIC_ENDPOINTS
    # The description and its page need no database: while it is away, or taken for not answering
    # (models/breaker.py), they are served at once, uncounted (no RateLimit headers); everything else
    # is 503 (docs/authentication.md).
    if public and (breaker.is_open() or request.endpoint in UNCOUNTED_ENDPOINTS):
        return
    if _one_trip(token):
        g.deferred_token = token
        return
    _count_and_check(token, public)


def _one_trip(token):
    return (request.endpoint in ONE_TRIP_ENDPOINTS and request.routing_exception is None
            and request.method in ("GET", "HEAD") and COUNTED_BY not in request.environ
            and not request.content_length and token is not None and tokens.TOKEN_PATTERN.fullmatch(token)
            and request.headers.get("Service-Version", versions.LATEST) in versions.PUBLISHED)


def deferred():
    """Whether this request's token check and count were left to its view (ONE_TRIP_ENDPOINTS)."""
    return "deferred_token" in g


def complete(work=None):
    """Run the token check and count left to the view, with `work`'s statement when given; no-op when not left.

    `work(conn, fingerprint, address, window_seconds)` sends the count with what the view
    needs in one statement and returns (Authentication, what it read); complete returns what it read after
    the checks of guard_request (which raise as they do there), None without `work`. The view calls it
    before anything of its own can refuse the request, so that a 401 or 429 comes first, as on any route.
    """
    if not deferred():
        return None
    token = g.pop("deferred_token")
    return _count_and_check(token, False, work)


def _count_and_check(token, public, work=None):
    read = None
    try:
        with deadline.within(PUBLIC_WAIT_SECONDS if public else None):
            authentication = request.environ.get(COUNTED_BY)
            if authentication is None and work is not None:
                authentication, read = first_statements(lambda conn: work(conn, *_count_arguments(token)))
            elif authentication is None:
                authentication = first_statements(lambda conn: authenticate_and_count(conn, token))
    except db.DatabaseUnavailable:
        if public:
            return None
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
        return None
    if token is None:
        raise MissingToken("No API token was sent. Send it as `Authorization: Bearer <ACCESS_TOKEN>`.")
    if principal is None:
        raise InvalidToken("The API token is invalid, expired or revoked, or its user left the organization.")
    g.principal = principal
    g.version = requested_version() or pinned_version(principal)
    return read


def authenticate_and_count(conn, token):
    """The request's Authentication (models.rate_limits): its first statement, which first_statements may repeat."""
    return rate_limits.authenticate_and_count(conn, *_count_arguments(token))


def _count_arguments(token):
    """(fingerprint or None, client address, window seconds): what a count is sent."""
    fingerprint = tokens.fingerprint(token) if token is not None and tokens.TOKEN_PATTERN.fullmatch(token) else None
    return fingerprint, request.remote_addr or "unknown", current_app.config["RATE_LIMITS"]["window_seconds"]


def enforce_rate_limits(authentication, failed_authentication=False):
    """Raise 429 when this request's count passed a limit of the spec.

    Keeps the limit closest to running out in `g.rate_limit` for the RateLimit headers of the response.
    """
    limits = current_app.config["RATE_LIMITS"]
    states = limit_states(authentication.policies, authentication.counts, limits)
    g.rate_limit = closest_limit(states)
    # What count_not_modified needs to take this request back from the window it was counted in.
    g.rate_limit_counted = authentication
    exceeded = [state.resets_in for state in states if state.remaining < 0]
    if not exceeded:
        return
    retry_after = max(exceeded)
    if authentication.principal is None:
        raise RateLimited(anonymous_limit_message(limits, retry_after, failed_authentication),
                          retry_after=retry_after)
    raise RateLimited("Too many requests. Wait for the number of seconds in Retry-After, then retry.",
                      retry_after=retry_after)


def limit_states(policies, counts, limits):
    """The LimitState of each bucket (`counts` maps buckets to models.rate_limits.Count)."""
    return [LimitState(policy, quota(limits, policy), quota(limits, policy) - counts[bucket].hits,
                       counts[bucket].resets_in)
            for bucket, policy in policies.items()]


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

    Returns the RateLimited to answer instead when that budget is spent, else None. The count is taken
    before the view runs, or with its page, and cannot know the answer (the view makes the ETag), so a 304
    pays a second statement that moves the hit within the same window.
    """
    counted = g.pop("rate_limit_counted", None)
    if counted is None:
        return None
    policies = counted.policies
    limits = current_app.config["RATE_LIMITS"]
    # The token's bucket, or the address's without a valid token: per_ip only ever comes with per_token.
    bucket, policy = next((bucket, policy) for bucket, policy in policies.items() if policy != "per_ip")
    budget_policy = NOT_MODIFIED + policy
    budget_quota = quota(limits, budget_policy)
    try:
        budget = rate_limits.count_not_modified(get_conn(), policies, NOT_MODIFIED + bucket, counted.window_start,
                                                budget_quota, limits["window_seconds"])
    except (db.DatabaseUnavailable, *db.TransientConflict):
        # The 304 is still right; the database went away after the view (or a conflict rolled the move
        # back), so its count stays.
        return None
    budget_state = LimitState(budget_policy, budget_quota, budget_quota - budget.hits, budget.resets_in)
    if budget.hits > budget_quota:
        g.rate_limit = closest_limit([budget_state])
        return RateLimited(not_modified_message(policy, limits, budget.resets_in), retry_after=budget.resets_in)
    if set(budget.given_back) == set(policies):  # else the window was pruned meanwhile: nothing was given back
        g.rate_limit = closest_limit(limit_states(policies, budget.given_back, limits) + [budget_state])
    return None


def not_modified_message(policy, limits, retry_after):
    """The 429 message past a 304 budget: which budget ran out, and that the request limit is not the one."""
    owner = "this token" if policy == "per_token" else "this address without a valid token"
    return (f"Too many 304 Not Modified answers for {owner}: they are not counted against its limit of "
            f"{limits[policy]} requests, but are limited to {quota(limits, NOT_MODIFIED + policy)} per "
            f"{_duration(limits['window_seconds'])} ({NOT_MODIFIED + policy}). "
            f"The count resets in {_duration(retry_after, in_minutes=False)} (Retry-After).")


def add_rate_limit_headers(response):
    """RateLimit-Policy and RateLimit (draft-ietf-httpapi-ratelimit-headers-11) on every counted request.

    Both describe one policy, the one closest to running out: `"per_token";q=600;w=300` and
    `"per_token";r=597;t=212` (quota, window, remaining and seconds until the window resets).
    """
    state = g.get("rate_limit")
    if state is not None:
        window = current_app.config["RATE_LIMITS"]["window_seconds"]
        response.headers["RateLimit-Policy"] = f'"{state.policy}";q={state.quota};w={window}'
        response.headers["RateLimit"] = f'"{state.policy}";r={state.remaining};t={state.resets_in}'
    return response


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


def _duration(seconds, in_minutes=True):
    if in_minutes and seconds % 60 == 0:
        return f"{seconds // 60} minute{'' if seconds == 60 else 's'}"
    return f"{seconds} second{'' if seconds == 1 else 's'}"


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
        principal["api_version"] = organizations.pin_version(get_conn(), principal["organization_id"],
                                                             versions.LATEST)
    return principal["api_version"]


def add_version_header(response):
    """Send Service-Version on responses built after the token and version were accepted."""
    if g.get("version") and not getattr(response, "unversioned", False):
        response.headers["Service-Version"] = g.version
    return response
