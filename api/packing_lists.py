"""GET /shipments/{shipment_id}/packing_lists."""
from flask import Blueprint

from api.context import get_conn, principal
from api.render import get_route, listing, missing, path_id
from api.schemas.common import list_schema
from api.schemas.packing_lists import PackingListSchema
from models import packing_lists

bp = Blueprint("packing_lists", __name__)


@get_route(bp, "/shipments/<shipment_id>/packing_lists")
def list_shipment_packing_lists(shipment_id):
    """Current packing lists of a shipment with pallets and lines, oldest first, not paged."""
    items = packing_lists.list_shipment_packing_lists(get_conn(), principal()["organization_id"],
                                                      path_id(shipment_id, "shp", "shipment"))
    if items is None:
        raise missing("shipment", shipment_id)
    return listing("packing_list", PackingListSchema(), items)


# The OpenAPI description of this module's operations (api/openapi.py collects them).
OPERATIONS = [
    ("list_shipment_packing_lists", "/shipments/{shipment_id}/packing_lists",
     "Current packing lists of a shipment with pallets and lines, oldest first, not paged.",
     ("shipment_id", "shp"), None, list_schema(PackingListSchema, "PackingListList")),
]
