"""GET /alerts."""
from flask import Blueprint

from api.context import get_conn, principal
from api.params import parse_query
from api.render import get_route, listing
from api.schemas.alerts import AlertListQuerySchema, MonitoringAlertSchema
from api.schemas.common import list_schema
from models import alerts

bp = Blueprint("alerts", __name__)


@get_route(bp, "/alerts")
def list_alerts():
    """Open alerts of customer-visible kinds across all shipments (archived included), newest first."""
    query = parse_query(AlertListQuerySchema())
    items = alerts.list_alerts(get_conn(), principal()["organization_id"], query["limit"] + 1,
                               shipment_id=query.get("shipment"), starting_after=query.get("starting_after"))
    return listing("monitoring_alert", MonitoringAlertSchema(), items, query["limit"])


# The OpenAPI description of this module's operations (api/openapi.py collects them).
OPERATIONS = [
    ("list_alerts", "/alerts", "Open alerts of customer-visible kinds, newest first, keyset-paged.",
     None, AlertListQuerySchema, list_schema(MonitoringAlertSchema, "MonitoringAlertList")),
]
