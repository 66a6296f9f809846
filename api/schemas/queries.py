"""Query-parameter schemas of the list endpoints (XListQuerySchema)."""
import re

from marshmallow import ValidationError, fields

from api.params import (MAX_VALUE_LENGTH, OPTIONAL, ChangeCursor, Choice, CommaSeparated, IdList, Limit,
                        PrefixedId, QuerySchema, TimeParam)
from models.webhooks import EVENT_TYPES
from rendering.schemas.checks import CHECK_STATUSES, DEFAULT_CHECK_STATUSES
from rendering.schemas.fields import doc

SHIPMENT_FILTER_STATUSES = ("draft", "validated", "in_transit", "arrived", "in_warehouse")
# The longest `wait` of GET /changes and GET /events (api/waiting.py); the fronts' timeouts are 90 s (monitoring.md).
MAX_WAIT_SECONDS = 60


class Wait(fields.Integer):
    """Seconds a call with nothing new may be held (api/waiting.py): decimal digits, 0 to MAX_WAIT_SECONDS."""

    def __init__(self, nothing_new, until):
        super().__init__(metadata=doc(
            f"Seconds to hold a call answering {nothing_new} until {until}, at most {MAX_WAIT_SECONDS} "
            f"(a hold ends up to a sixteenth of it later, at random, so clients started together spread out: give "
            f"the call a timeout well above it, such as 90 s). Omitted, empty or 0: answered at once.",
            minimum=0, maximum=MAX_WAIT_SECONDS,
            parameter=OPTIONAL))

    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, str) or not re.fullmatch("[0-9]{1,2}", value, re.ASCII) \
                or int(value) > MAX_WAIT_SECONDS:
            raise ValidationError(f"wait must be an integer from 0 to {MAX_WAIT_SECONDS}, written in decimal digits.")
        return int(value)


class ShipmentListQuerySchema(QuerySchema):
    q = fields.String(metadata=doc(
        "Free text: case-insensitive partial match on shipment reference, ERP reference, transport reference "
        "and container numbers (spaces and dashes ignored), consignor and consignee (tolerant of small "
        "spelling differences) and produce names (common aliases understood). Empty means no search.",
        maxLength=MAX_VALUE_LENGTH, pattern="^[^\\x00]*$", parameter=OPTIONAL))
    status = CommaSeparated(SHIPMENT_FILTER_STATUSES, "Statuses to include; omitted means all.")
    labels = IdList("lbl", "Shipments carrying all of these labels.")
    archived = Choice(("false", "true", "any"), "`false` (default): active only; `true`: archived only; "
                                                "`any`: both.", load_default="false")
    created_after = TimeParam("Inclusive lower bound on creation time.")
    created_before = TimeParam("Inclusive upper bound on creation time.")
    eta_after = TimeParam("Inclusive lower bound on `effective_eta`; shipments without ETA never match.")
    eta_before = TimeParam("Inclusive upper bound on `effective_eta`; shipments without ETA never match.")
    limit = Limit()
    starting_after = PrefixedId("shp", "Id of the last shipment of the previous page.")


class AlertListQuerySchema(QuerySchema):
    shipment = PrefixedId("shp", "Only alerts of this shipment; an id not in the organization matches nothing.")
    limit = Limit()
    starting_after = PrefixedId("alr", "Id of the last alert of the previous page.")


class CheckListQuerySchema(QuerySchema):
    # parse_query drops empty values, so an empty status falls back to the default too.
    status = CommaSeparated(CHECK_STATUSES, "Statuses to include; default `failed,warning` when omitted or empty.",
                            load_default=DEFAULT_CHECK_STATUSES)
    shipment = PrefixedId("shp", "Only checks of this shipment; an id not in the organization matches nothing.")
    limit = Limit()
    starting_after = PrefixedId("chk", "Id of the last check of the previous page.")


class EventListQuerySchema(QuerySchema):
    type = CommaSeparated(EVENT_TYPES, "Event types to include; omitted means all.")
    shipment = PrefixedId("shp", "Only events of this shipment; an id not in the organization matches nothing.")
    created_after = TimeParam("Inclusive lower bound on the event's `created_at` (the last 30 days are kept "
                              "whatever this says).")
    created_before = TimeParam("Inclusive upper bound on the event's `created_at`.")
    delivery_success = Choice(("true", "false"), "`false`: only events that some enabled endpoint of the "
                                                 "organization, subscribed to the type and created before the "
                                                 "event, has not received yet (its delivery is still being tried, "
                                                 "failed, was dropped, or was never made because the endpoint was "
                                                 "disabled); `true`: only the others, every such endpoint got them "
                                                 "(events no endpoint subscribes to included).")
    limit = Limit()
    starting_after = PrefixedId("msg", "Id of the last event of the previous page.")
    wait = Wait("an empty page, or the page `If-None-Match` names,", "an event of the organization is rendered")


class ChangeListQuerySchema(QuerySchema):
    since = ChangeCursor("`next_since` of the previous page; omitted or `0.0`: from the beginning. A cursor never "
                         "expires; one this database cannot have given (from another database, or from before a "
                         "restore) is a 400 `invalid_parameter`: start again from the beginning.")
    limit = Limit(default=100)
    wait = Wait("an empty page (the cursor is at the head of the feed)", "a change of the organization can be listed")
