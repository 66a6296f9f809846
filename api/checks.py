"""GET /checks."""
from flask import Blueprint

from api.apidoc import get_route
from api.context import get_conn, principal
from api.params import parse_query
from api.responses import listing
from api.schemas.queries import CheckListQuerySchema
from api.schemas.common import list_schema
from models import checks
from rendering.schemas.checks import ShipmentCheckSchema

bp = Blueprint("checks", __name__)


@get_route(bp, "/checks", list_schema(ShipmentCheckSchema, "ShipmentCheckList"), query=CheckListQuerySchema)
def list_checks():
    """Current quality checks, newest first, keyset-paged.

    Across all shipments, archived ones included. `status` defaults to `failed,warning` when omitted
    or empty; `shipment` keeps one shipment's checks. Page with `limit` and `starting_after`, the last
    id of the previous page, while `has_more` is true.
    """
    query = parse_query(CheckListQuerySchema)
    items = checks.list_checks(get_conn(), principal()["organization_id"], query["limit"] + 1,
                               query["status"], shipment_id=query.get("shipment"),
                               starting_after=query.get("starting_after"))
    return listing("shipment_check", ShipmentCheckSchema, items, query["limit"])
