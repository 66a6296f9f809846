"""GET /shipments/{shipment_id}/packing_lists."""
from flask import Blueprint

from api.apidoc import get_route
from api.conditional import stored_etag
from api.context import get_conn, principal, version
from api.responses import missing, path_id, stored_bytes
from api.schemas.common import list_schema
from rendering import shipment_renderings
from rendering.schemas.packing_lists import PackingListSchema

bp = Blueprint("packing_lists", __name__)


@get_route(bp, "/shipments/<shipment_id>/packing_lists", list_schema(PackingListSchema, "PackingListList"))
def list_shipment_packing_lists(shipment_id):
    """Current packing lists of a shipment with pallets and lines, oldest first, not paged.

    Replaced packing lists are left out. Pallets on no packing list are not reachable here, but count
    in the shipment's `cargo.pallets`. `has_more` is always false.
    """
    found = shipment_renderings.packing_lists_body(get_conn(), principal()["organization_id"], version(),
                                                   path_id(shipment_id, "shp", "shipment"))
    if found is None:
        raise missing("shipment", shipment_id)
    body, md5 = found
    # The ETag of the stored MD5, not of the body (docs/serving.md).
    return stored_bytes(stored_etag(version(), md5), body.encode())
