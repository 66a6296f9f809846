"""GET /shipments/{shipment_id}/timeline."""
from flask import Blueprint

from api.apidoc import get_route
from api.context import get_conn, principal
from api.responses import missing, path_id, resource
from models import timeline
from rendering.schemas.timeline import TimelineSchema

bp = Blueprint("timeline", __name__)


@get_route(bp, "/shipments/<shipment_id>/timeline", TimelineSchema)
def get_shipment_timeline(shipment_id):
    """Legs, tracking events and ETA revisions of a shipment.

    Legs are in travel order. Tracking events are oldest first; events without a time are placed by
    the usual order of milestones. ETA revisions are oldest first, one per move of 5 minutes or more.
    """
    found = timeline.get_timeline(get_conn(), principal()["organization_id"],
                                  path_id(shipment_id, "shp", "shipment"))
    if found is None:
        raise missing("shipment", shipment_id)
    return resource("timeline", TimelineSchema, found)
