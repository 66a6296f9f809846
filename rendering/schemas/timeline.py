"""Timeline: shipment legs, tracking events and ETA revisions."""
from marshmallow import Schema, fields

from rendering.schemas.fields import Id, LocalDateTime, UtcDateTime, doc, enum, nullable_string
from rendering.schemas.shipments import TRANSPORT_TYPES, PlaceSchema

MILESTONES = (
    "booked", "received_from_shipper", "empty_pickup", "stuffed", "gate_in", "manifested", "loaded", "departed",
    "transshipment_arrival", "transshipment_discharge", "transferred", "transshipment_load",
    "transshipment_departure", "arrived", "discharged", "customs_cleared", "notified", "available_for_pickup",
    "gate_out", "delivered", "stripped", "empty_return", "eta_revised", "exception", "untracked")


class ShipmentLegSchema(Schema):
    object = fields.Constant("shipment_leg", metadata=doc("Always `shipment_leg`."))
    id = Id("leg")
    position = fields.Integer(metadata=doc("Zero-based order in the route; not the same as `leg_index`."))
    transport_type = enum(TRANSPORT_TYPES, "Mode of this leg.", allow_none=True)
    carrier = nullable_string("Carrier of this leg.")
    transport_reference = nullable_string("Bill of lading, air waybill or container number of this leg.")
    origin = fields.Nested(PlaceSchema, metadata=doc("Where the leg starts."))
    destination = fields.Nested(PlaceSchema, metadata=doc("Where the leg ends."))
    etd = UtcDateTime(allow_none=True, metadata=doc("Departure, from the transport document."))
    eta = UtcDateTime(allow_none=True, metadata=doc("Arrival, from the transport document."))


class EventLocationSchema(Schema):
    name = nullable_string("Location name.")
    code = nullable_string("UN/LOCODE for ports where available.")
    country_code = nullable_string("ISO 3166-1 alpha-2 country code.")


class VesselSchema(Schema):
    name = nullable_string("Vessel name.")
    imo = nullable_string("IMO number.")
    voyage = nullable_string("Voyage number.")


class PositionSchema(Schema):
    latitude = fields.Float(allow_none=True, metadata=doc("Decimal degrees."))
    longitude = fields.Float(allow_none=True, metadata=doc("Decimal degrees."))


class TrackingEventSchema(Schema):
    object = fields.Constant("tracking_event", metadata=doc("Always `tracking_event`."))
    id = Id("evt")
    milestone = enum(MILESTONES, "What happened. Cargo milestones in their usual order; `received_from_shipper`, "
                                 "`manifested`, `transferred`, `notified` are air milestones; the last three are "
                                 "lifecycle milestones.")
    actual = fields.Boolean(metadata=doc("True when it happened, false for an estimate."))
    occurred_at = UtcDateTime(allow_none=True, metadata=doc("When, in UTC."))
    occurred_at_local = LocalDateTime(allow_none=True, metadata=doc(
        "The same instant with the local offset when the source gave it, else the UTC time; "
        "null when occurred_at is null."))
    container_number = nullable_string("Container; null for shipment-wide events.")
    leg_index = fields.Integer(allow_none=True, metadata=doc(
        "One-based number of the vessel or flight leg (1 first, 2 after a transshipment)."))
    location = fields.Nested(EventLocationSchema, metadata=doc("Where."))
    vessel = fields.Nested(VesselSchema, metadata=doc("Vessel, for ocean events."))
    flight_number = nullable_string("Flight, for air events.")
    position = fields.Nested(PositionSchema, metadata=doc("Coordinates."))


class EtaRevisionSchema(Schema):
    object = fields.Constant("eta_revision", metadata=doc("Always `eta_revision`."))
    id = Id("eta")
    observed_at = UtcDateTime(metadata=doc("When the change was seen; for backfilled revisions only the time "
                                           "of the last refresh."))
    previous_eta = UtcDateTime(allow_none=True, metadata=doc("ETA before; null for the first estimate."))
    new_eta = UtcDateTime(metadata=doc("ETA after."))
    slip_seconds = fields.Integer(allow_none=True, metadata=doc(
        "new_eta minus previous_eta in seconds, negative when earlier; null for the first estimate."))
    first_estimate = fields.Boolean(metadata=doc("Whether this is the first estimate."))
    backfilled = fields.Boolean(metadata=doc("Reconstructed from older data."))


class TimelineSchema(Schema):
    object = fields.Constant("timeline", metadata=doc("Always `timeline`."))
    shipment_id = Id("shp", "The shipment.")
    legs = fields.List(fields.Nested(ShipmentLegSchema), metadata=doc("Legs in travel order."))
    events = fields.List(fields.Nested(TrackingEventSchema), metadata=doc(
        "Oldest first; events without a time are placed by the usual order of milestones (docs/timeline.md)."))
    eta_revisions = fields.List(fields.Nested(EtaRevisionSchema), metadata=doc("Oldest first."))
