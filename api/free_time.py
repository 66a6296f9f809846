"""GET /shipments/{shipment_id}/free_time and GET /free_time/at_risk."""
from flask import Blueprint

from api.apidoc import get_route
from api.context import get_conn, principal
from api.render import listing, missing, path_id, resource
from api.schemas.common import list_schema
from api.schemas.free_time import FreeTimeSummarySchema
from models import free_time_queries

bp = Blueprint("free_time", __name__)


@get_route(bp, "/shipments/<shipment_id>/free_time", FreeTimeSummarySchema)
def get_shipment_free_time(shipment_id):
    """Demurrage and detention clocks of one shipment.

    Only ocean shipments have clocks: one of each kind per container with loading, discharge, gate-out
    or empty-return events. For other shipments both lists are empty and `active_clock` is null. A
    clock stays `not_started` until its container is discharged.
    """
    summary = free_time_queries.get_free_time(get_conn(), principal()["organization_id"],
                                              path_id(shipment_id, "shp", "shipment"))
    if summary is None:
        raise missing("shipment", shipment_id)
    return resource("free_time_summary", FreeTimeSummarySchema(), summary)


@get_route(bp, "/free_time/at_risk", list_schema(FreeTimeSummarySchema, "FreeTimeSummaryList"))
def list_free_time_at_risk():
    """Shipments whose demurrage has 2 or fewer days left or is overdue, most urgent first, not paged.

    Only ocean shipments that are not archived, not yet in the warehouse and discharged in the last
    45 days are considered; shipments with unknown terms never appear. `has_more` is always false.
    """
    items = free_time_queries.list_at_risk(get_conn(), principal()["organization_id"])
    return listing("free_time_summary", FreeTimeSummarySchema(), items)
