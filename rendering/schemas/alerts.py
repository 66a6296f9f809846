"""MonitoringAlert (the query parameters of GET /alerts are in api/schemas/queries.py)."""
from marshmallow import Schema, fields

from rendering.schemas.fields import Id, UtcDateTime, doc


class MonitoringAlertSchema(Schema):
    """An open alert on a shipment; also the `data.object` of `alert.created` webhooks."""

    object = fields.Constant("monitoring_alert", metadata=doc("Always `monitoring_alert`."))
    id = Id("alr")
    shipment_id = Id("shp", "The shipment the alert is about.")
    shipment_reference = fields.String(metadata=doc("The shipment's reference."))
    key = fields.String(metadata=doc("Kind of alert (for example `eta_drift`); open list."))
    group = fields.String(metadata=doc("Group of the kind (for example `schedule`); open list."))
    severity = fields.String(metadata=doc("Severity (for example `warning`); open list."))
    title = fields.String(metadata=doc("Short title."))
    summary = fields.String(metadata=doc("One-paragraph summary."))
    since = UtcDateTime(metadata=doc("Since when the condition holds."))
    first_detected_at = UtcDateTime(metadata=doc("When the condition was first detected."))
    last_detected_at = UtcDateTime(metadata=doc("When the condition was last detected."))
    resolved_at = UtcDateTime(allow_none=True, metadata=doc("When the alert was resolved; null while open."))
