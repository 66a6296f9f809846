"""The page of GET /changes: shipments as they are now, or deleted, in the order of their latest change."""
from marshmallow import Schema, fields

from rendering.ids import CHANGE_CURSOR_PATTERN
from rendering.schemas.fields import OneOf, doc
from rendering.schemas.shipments import DeletedShipmentSchema, ShipmentSchema


class ChangeListSchema(Schema):
    object = fields.Constant("list", metadata=doc("Always `list`."))
    data = fields.List(OneOf((ShipmentSchema, DeletedShipmentSchema)), metadata=doc(
        "Shipments changed after `since`, oldest change first, each once: as `GET /shipments/{shipment_id}` "
        "shows it now, or `{object, id, deleted: true, revision}` when it was deleted or became hidden."))
    has_more = fields.Boolean(metadata=doc("Whether more changes are ready now: ask again at once with `next_since`."))
    next_since = fields.String(metadata=doc(
        "Pass as `since` next time. The same as `since` when there is nothing new.", pattern=CHANGE_CURSOR_PATTERN))
