"""GET /shipments/{shipment_id}/timeline."""
from flask import Blueprint

from api.apidoc import get_route
from api.context import get_conn, principal
from api.render import missing, path_id, resource
from api.schemas.timeline import TimelineSchema
from models import timeline

bp = Blueprint("timeline", __name__)


@get_route(bp, "/shipments/<shipment_id>/timeline", TimelineSchema,
           summary="Legs, tracking events and ETA revisions of a shipment.")
def get_shipment_timeline(shipment_id):
    """Legs in travel order, tracking events oldest first, ETA revisions oldest first."""
    found = timeline.get_timeline(get_conn(), principal()["organization_id"],
                                  path_id(shipment_id, "shp", "shipment"))
    if found is None:
        raise missing("shipment", shipment_id)
    return resource("timeline", TimelineSchema(), found)
