"""GET /alerts."""
from flask import Blueprint

from api.apidoc import get_route
from api.context import get_conn, principal
from api.params import parse_query
from api.responses import listing
from api.schemas.queries import AlertListQuerySchema
from api.schemas.common import list_schema
from models import alerts
from rendering.schemas.alerts import MonitoringAlertSchema

bp = Blueprint("alerts", __name__)


@get_route(bp, "/alerts", list_schema(MonitoringAlertSchema, "MonitoringAlertList"), query=AlertListQuerySchema)
def list_alerts():
    """Open alerts of customer-visible kinds, newest first, keyset-paged.

    Across all shipments, archived ones included. `shipment` keeps one shipment's alerts (a well-formed
    id of no shipment here matches nothing). Page with `limit` and `starting_after`, the last id of
    the previous page, while `has_more` is true.
    """
    query = parse_query(AlertListQuerySchema)
    items = alerts.list_alerts(get_conn(), principal()["organization_id"], query["limit"] + 1,
                               shipment_id=query.get("shipment"), starting_after=query.get("starting_after"))
    return listing("monitoring_alert", MonitoringAlertSchema, items, query["limit"])
