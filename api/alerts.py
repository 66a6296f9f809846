"""GET /alerts."""
from flask import Blueprint

from api.apidoc import get_route
from api.context import get_conn, principal
from api.params import parse_query
from api.render import listing
from api.schemas.alerts import MonitoringAlertSchema
from api.schemas.queries import AlertListQuerySchema
from api.schemas.common import list_schema
from models import alerts

bp = Blueprint("alerts", __name__)


@get_route(bp, "/alerts", list_schema(MonitoringAlertSchema, "MonitoringAlertList"), query=AlertListQuerySchema,
           summary="Open alerts of customer-visible kinds, newest first, keyset-paged.")
def list_alerts():
    """Open alerts of customer-visible kinds across all shipments (archived included), newest first."""
    query = parse_query(AlertListQuerySchema())
    items = alerts.list_alerts(get_conn(), principal()["organization_id"], query["limit"] + 1,
                               shipment_id=query.get("shipment"), starting_after=query.get("starting_after"))
    return listing("monitoring_alert", MonitoringAlertSchema(), items, query["limit"])
