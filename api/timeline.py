"""GET /shipments/{shipment_id}/timeline."""
from flask import Blueprint

from api.context import get_conn, principal
from api.render import get_route, missing, path_id, resource
from api.schemas.timeline import TimelineSchema
from models import timeline

bp = Blueprint("timeline", __name__)


@get_route(bp, "/shipments/<shipment_id>/timeline")
def get_shipment_timeline(shipment_id):
    """Legs in travel order, tracking events oldest first, ETA revisions oldest first."""
    found = timeline.get_timeline(get_conn(), principal()["organization_id"],
                                  path_id(shipment_id, "shp", "shipment"))
    if found is None:
        raise missing("shipment", shipment_id)
    return resource("timeline", TimelineSchema(), found)


# The OpenAPI description of this module's operations (api/openapi.py collects them).
OPERATIONS = [
    ("get_shipment_timeline", "/shipments/{shipment_id}/timeline",
     "Legs, tracking events and ETA revisions of a shipment.", ("shipment_id", "shp"), None, TimelineSchema),
]
