"""ShipmentCheck (the query parameters of GET /checks are in api/schemas/queries.py)."""
from marshmallow import Schema, fields

from rendering.schemas.fields import Id, UtcDateTime, doc, enum

CHECK_STATUSES = ("pending", "passed", "failed", "skipped", "warning")
DEFAULT_CHECK_STATUSES = ["failed", "warning"]


class ShipmentCheckSchema(Schema):
    object = fields.Constant("shipment_check", metadata=doc("Always `shipment_check`."))
    id = Id("chk")
    shipment_id = Id("shp", "The shipment checked.")
    shipment_reference = fields.String(metadata=doc("The shipment's reference."))
    key = fields.String(metadata=doc("Which check (for example `has_commercial_invoice`); open list."))
    category = fields.String(metadata=doc("Category of the check (for example `documents`); open list."))
    status = enum(CHECK_STATUSES, "Result of the check.")
    title = fields.String(metadata=doc("Short title."))
    message = fields.String(metadata=doc("Explanation of the result."))
    ran_at = UtcDateTime(metadata=doc("When the check last ran."))
