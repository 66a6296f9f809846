"""GET /shipments/{shipment_id}/packing_lists."""
from flask import Blueprint

from api.apidoc import get_route
from api.context import get_conn, principal
from api.render import listing, missing, path_id
from api.schemas.common import list_schema
from api.schemas.packing_lists import PackingListSchema
from models import packing_lists

bp = Blueprint("packing_lists", __name__)


@get_route(bp, "/shipments/<shipment_id>/packing_lists", list_schema(PackingListSchema, "PackingListList"))
def list_shipment_packing_lists(shipment_id):
    """Current packing lists of a shipment with pallets and lines, oldest first, not paged.

    Replaced packing lists are left out. Pallets on no packing list are not reachable here, but count
    in the shipment's `cargo.pallets`. `has_more` is always false.
    """
    items = packing_lists.list_shipment_packing_lists(get_conn(), principal()["organization_id"],
                                                      path_id(shipment_id, "shp", "shipment"))
    if items is None:
        raise missing("shipment", shipment_id)
    return listing("packing_list", PackingListSchema(), items)
