"""Query-parameter schemas of the list endpoints (XListQuerySchema)."""
from marshmallow import fields

from api.params import (MAX_VALUE_LENGTH, OPTIONAL, Choice, CommaSeparated, IdList, Limit, PrefixedId,
                        QuerySchema, TimeParam)
from api.schemas.fields import doc

SHIPMENT_FILTER_STATUSES = ("draft", "validated", "in_transit", "arrived", "in_warehouse")


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
