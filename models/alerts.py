"""Monitoring alerts as the API shows them: open, of customer-visible kinds, on visible shipments."""
from models.db import execute_all, execute_one

# list_alerts / get_alert: open alerts of customer-visible kinds on shipments the API shows
# (archived included; awaiting approval or owned elsewhere excluded), newest first (keyset on id).
# Served by alerts_open_idx, or alerts_shipment_idx with the shipment filter. get_alert also finds
# a resolved alert: an alert.created webhook rendered after the alert closed still goes out.
LIST_SQL = """
SELECT a.id, a.shipment_id, s.reference AS shipment_reference, a.key, k."group", a.severity,
       a.title, a.summary, a.since, a.first_detected_at, a.last_detected_at, a.resolved_at
  FROM alerts a
  JOIN alert_kinds k ON k.key = a.key
  JOIN shipments s ON s.id = a.shipment_id
 WHERE a.organization_id = %(organization_id)s
   AND (%(include_resolved)s OR a.resolved_at IS NULL)
   AND k.customer_visible
   AND visible_to(s, %(organization_id)s)
   AND (%(alert_id)s::bigint IS NULL OR a.id = %(alert_id)s)
   AND (%(shipment_id)s::bigint IS NULL OR a.shipment_id = %(shipment_id)s)
   AND (%(starting_after)s::bigint IS NULL OR a.id < %(starting_after)s)
 ORDER BY a.id DESC
 LIMIT %(limit)s
"""


def list_alerts(conn, organization_id, limit, shipment_id=None, starting_after=None):
    """Up to `limit` open customer-visible alerts, newest first."""
    params = {"organization_id": organization_id, "limit": limit, "alert_id": None, "include_resolved": False,
              "shipment_id": shipment_id, "starting_after": starting_after}
    return execute_all(conn, LIST_SQL, params)


def get_alert(conn, organization_id, alert_id):
    """One alert as MonitoringAlertSchema dumps it (resolved ones too, with resolved_at), or None when
    its kind is internal or its shipment is hidden or another organization's."""
    params = {"organization_id": organization_id, "limit": 1, "alert_id": alert_id, "include_resolved": True,
              "shipment_id": None, "starting_after": None}
    return execute_one(conn, LIST_SQL, params)
