"""GET views that carry their own OpenAPI documentation; api/openapi.py reads it back from app.url_map."""
import copy
import inspect
import re
from dataclasses import dataclass, field

from api.context import read_again_if_lost
from api.observe import HEADER as REQUEST_ID_HEADER
from rendering.ids import PREFIXES, id_pattern

# A werkzeug rule variable: `<name>` or `<converter:name>` (converter arguments allowed).
_VARIABLE = re.compile(r"<(?:([A-Za-z_][A-Za-z0-9_]*)(?:\([^)]*\))?:)?([A-Za-z_][A-Za-z0-9_]*)>")

ERROR_RESPONSES = {
    "400": "A parameter or header is invalid (`invalid_parameter`), or Service-Version names an "
           "unpublished version (`invalid_version`).",
    "401": "No token (`missing_token`), or a wrong, expired or revoked token (`invalid_token`).",
    "404": "No such object in this organization, or an unknown route (`resource_missing`).",
    "429": "A rate limit was hit (`rate_limited`); `Retry-After` gives seconds to wait. Requests without a "
           "valid token share one budget per client address (30 per 5 minutes) and failed authentications (a "
           "wrong, expired or revoked token) count toward it: they are answered 401 `invalid_token` until it is "
           "spent, then 429 with a message saying that failed authentications are counted and when the count "
           "resets. A valid token from the same address is counted separately and is not held up. 304s are not "
           "counted against these limits but against a budget of their own, ten times as large; past it the "
           "message and `RateLimit-Policy` name it (`not_modified_per_token`, `not_modified_anonymous_per_ip`).",
    "503": "The service cannot reach its database, or the request met a conflicting change in it that retries did "
           "not get past (`service_unavailable`); `Retry-After` gives seconds to wait. It recovers by itself. Not "
           "counted against the rate limits.",
}


@dataclass(frozen=True)
class ViewDoc:
    """What the description says about one GET view; the path and its parameters come from its rule."""

    operation_id: str
    summary: str
    description: str
    response: object
    query: object = None
    media_types: tuple = ("application/json",)
    response_description: str = "Success."
    headers: dict = field(default_factory=dict)
    errors: dict = field(default_factory=dict)
    public: bool = False
    components: tuple = ()
    include_in_description: bool = True  # False: served, but no operation in /openapi.json (the view says why)


def docstring_parts(view):
    """(summary, description) of a view: its docstring's first paragraph and the paragraphs after it."""
    head, _, body = inspect.cleandoc(view.__doc__ or "").partition("\n\n")
    return " ".join(head.split()), body.strip()


def get_route(blueprint, rule, response, *, summary=None, description=None, query=None, **details):
    """Register a GET-only view and attach its documentation, by default from the view's docstring.

    The docstring's first line is the operation's summary and its body the description (a docstring
    without a body describes the operation with its first line). `response` is the 200 body's schema;
    `details` are the other ViewDoc fields (media_types, each given that schema, response_description,
    headers, errors overriding ERROR_RESPONSES by status, public, components).
    """
    def register(view):
        head, body = docstring_parts(view)
        view.apidoc = ViewDoc(operation_id=view.__name__, summary=summary or head,
                              description=description or body or head, response=response, query=query, **details)
        # HEAD is answered as GET; OPTIONS is 405 like every other method.
        return blueprint.route(rule, methods=["GET"], provide_automatic_options=False)(read_again_if_lost(view))
    return register


def view_doc(view):
    """The ViewDoc attached to a view function, or None for an undocumented view."""
    return getattr(view, "apidoc", None)


def openapi_path(rule):
    """`/shipments/<shipment_id>` -> `/shipments/{shipment_id}`."""
    return _VARIABLE.sub(lambda match: "{" + match.group(2) + "}", rule)


def path_parameters(rule):
    """The path parameters of a rule: every variable is `<noun>_id`, a public id of ids.PREFIXES[noun]."""
    parameters = []
    for converter, name in _VARIABLE.findall(rule):
        noun = name.removesuffix("_id")
        # Ids are strings with a prefix; a typed converter would answer 404 in werkzeug's words, not ours.
        if converter not in ("", "default", "string") or noun == name or noun not in PREFIXES:
            raise ValueError(f"{rule}: path variable {name!r} is not `<noun>_id` for a noun of rendering.ids.PREFIXES")
        prefix = PREFIXES[noun]
        parameters.append({"in": "path", "name": name, "required": True,
                           "schema": {"type": "string", "pattern": id_pattern(prefix)},
                           "description": f"`{prefix}_<int>` id."})
    return parameters


# Every response of a request that was counted carries these (components of api/openapi.py).
RATE_LIMIT_HEADERS = {"RateLimit-Policy": "RateLimitPolicy", "RateLimit": "RateLimit"}


NOT_MODIFIED = ("Not Modified: `If-None-Match` names the current `ETag` (weak comparison; `*` matches). No body; "
                "not counted against the rate limits, so `RateLimit` shows the state without this request.")


# A 503 is not counted (api/guard.py gives its request back): Retry-After instead of the RateLimit headers.
SERVICE_UNAVAILABLE_HEADERS = {"Retry-After": {
    "schema": {"type": "integer", "minimum": 1},
    "description": "Seconds to wait before retrying."}}


def _error(status, description):
    headers = SERVICE_UNAVAILABLE_HEADERS if status == "503" else RATE_LIMIT_HEADERS
    return {"description": description, "content": {"application/json": {"schema": "Error"}},
            "headers": copy.deepcopy(headers)}


def operation(doc, rule):
    """The OpenAPI operation object of a documented GET view registered at `rule`."""
    success = {"description": doc.response_description,
               "content": {media_type: {"schema": doc.response} for media_type in doc.media_types},
               "headers": {"ETag": "ETag", **RATE_LIMIT_HEADERS, **doc.headers}}
    not_modified = {"description": NOT_MODIFIED, "headers": {"ETag": "ETag", **RATE_LIMIT_HEADERS}}
    parameters = path_parameters(rule)
    if doc.query is not None:
        parameters.append({"in": "query", "schema": doc.query})
    if doc.public:
        # No token and no version: only the per-IP rate limit can refuse the request (and never a 503:
        # while the database is away these are served uncounted, api/guard.py).
        security, errors = [], {"429": ERROR_RESPONSES["429"]}
    else:
        # `read` is the only scope and every token has it (the scheme's description says so): an
        # `http` scheme has no scopes to list, and a role list here would name nothing defined.
        security, errors = [{"bearer": []}], {**ERROR_RESPONSES, **doc.errors}
        parameters.insert(0, "ServiceVersion")
        success["headers"] = {"Service-Version": "ServiceVersion", **success["headers"]}
        not_modified["headers"] = {"Service-Version": "ServiceVersion", **not_modified["headers"]}
    parameters.extend(["IfNoneMatch", "RequestId"])
    result = {"operationId": doc.operation_id, "summary": doc.summary, "description": doc.description,
              "security": security}
    result["parameters"] = parameters
    result["responses"] = {"200": success, "304": not_modified,
                           **{code: _error(code, text) for code, text in sorted(errors.items())}}
    # api/observe.py sends it on every response, whatever the status and whoever answered.
    for response in result["responses"].values():
        response["headers"][REQUEST_ID_HEADER] = "RequestId"
    return result
