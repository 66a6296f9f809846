"""GET /checks."""
from flask import Blueprint

from api.context import get_conn, principal
from api.params import parse_query
from api.render import get_route, listing
from api.schemas.checks import CheckListQuerySchema, ShipmentCheckSchema
from api.schemas.common import list_schema
from models import checks

bp = Blueprint("checks", __name__)


@get_route(bp, "/checks")
def list_checks():
    """Current checks across all shipments (archived included), newest first; failed and warning by default."""
    query = parse_query(CheckListQuerySchema())
    items = checks.list_checks(get_conn(), principal()["organization_id"], query["limit"] + 1,
                               query["status"], shipment_id=query.get("shipment"),
                               starting_after=query.get("starting_after"))
    return listing("shipment_check", ShipmentCheckSchema(), items, query["limit"])


# The OpenAPI description of this module's operations (api/openapi.py collects them).
OPERATIONS = [
    ("list_checks", "/checks", "Current quality checks, newest first, keyset-paged.",
     None, CheckListQuerySchema, list_schema(ShipmentCheckSchema, "ShipmentCheckList")),
]
