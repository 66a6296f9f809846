"""GET /events and GET /events/{webhook_event_id}: the organization's webhook events of the last 30 days."""
from flask import Blueprint

from api import waiting
from api.apidoc import get_route
from api.conditional import body_etag, if_none_match_matches
from api.context import get_conn, principal, version
from api.errors import InvalidParameter
from api.params import parse_query
from api.responses import missing, path_id, stored, stored_listing
from api.schemas.queries import EventListQuerySchema
from models import events

bp = Blueprint("events", __name__)

_EVENT = {"$ref": "#/components/schemas/Event"}
_EVENT_LIST = {"$ref": "#/components/schemas/EventList"}
_DELIVERY_SUCCESS = {"true": True, "false": False}
OTHER_HISTORY_MESSAGE = ("starting_after names an event of another history of this database: it was sent before a "
                         "failover or a restore that lost it, and no page follows it. Start again without "
                         "starting_after.")


@get_route(bp, "/events", _EVENT_LIST, query=EventListQuerySchema, headers=waiting.POLL_HEADERS)
def list_events():
    """Webhook events of the last 30 days, newest first, keyset-paged.

    Each item is exactly the JSON body that was (or will be) sent to the organization's webhook endpoints,
    byte for byte: its `api_version` is the version it was rendered at, whatever `Service-Version` this
    request names. An event is listed once rendered (within a second of the change while the delivery
    loop watches, within a minute otherwise). Test events and events of shipments waiting for approval or
    belonging to someone else are not listed. Filters combine with AND. Page with `limit` and
    `starting_after`, the last id of the previous page, while `has_more` is true: events added meanwhile
    cause no gaps or repeats. To catch up after downtime, page with `delivery_success=false`. A `starting_after`
    only another history of the database can have given (an event lost in a failover or a restore) is a 400
    `invalid_parameter` on it: start again without it.

    With `wait`, a call whose page is empty, or whose `If-None-Match` names the page's ETag, is held
    until an event of the organization is rendered or the wait ends, then answers what the same call
    without `wait` answers at that moment (a 304 when the page is still the one named).
    `X-Poll-Interval` as on `GET /changes`.
    """
    query = parse_query(EventListQuerySchema)
    waiting.still_allowed()
    delivery_success = query.get("delivery_success")
    organization_id = principal()["organization_id"]
    heard = waiting.before_reading("events", organization_id)
    try:
        rows = events.list_history(
            get_conn(), organization_id, query["limit"] + 1,
            types=query.get("type"), shipment_id=query.get("shipment"),
            created_after=query.get("created_after"), created_before=query.get("created_before"),
            delivery_success=None if delivery_success is None else _DELIVERY_SUCCESS[delivery_success],
            starting_after=query.get("starting_after"))
    except events.EventOfAnotherHistory:
        raise InvalidParameter(OTHER_HISTORY_MESSAGE, param="starting_after") from None
    response = stored_listing([row["body"] for row in rows], query["limit"])
    # The ETag answer_conditionally would give it (api/conditional.py), to tell whether the client has this page.
    response.set_etag(body_etag(version(), response.get_data()))
    nothing_new = not rows or if_none_match_matches(response)
    return waiting.answer(response, "events", organization_id, waiting.parse_wait(query), nothing_new, heard)


@get_route(bp, "/events/<webhook_event_id>", _EVENT)
def get_event(webhook_event_id):
    """One webhook event of the last 30 days.

    Exactly the JSON body that was (or will be) sent, as `GET /events` lists it; its `api_version` is the
    version it was rendered at, whatever `Service-Version` this request names. An event not rendered yet,
    a test event, one older than 30 days, one of a shipment waiting for approval or belonging to someone
    else, or of another organization is a 404, like a missing one.
    """
    event = events.get_from_history(get_conn(), principal()["organization_id"],
                                    path_id(webhook_event_id, "msg", "event"))
    if event is None:
        raise missing("event", webhook_event_id)
    return stored(event["body"])
