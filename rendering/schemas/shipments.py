"""Shipment and the objects embedded in it: Place, Container, Label and the small summaries."""
from marshmallow import Schema, fields

from rendering.schemas.fields import Id, Number, UtcDateTime, doc, enum, nullable_string

SHIPMENT_STATUSES = ("draft", "validated", "in_transit", "arrived", "error", "in_warehouse")
TRANSPORT_TYPES = ("ocean", "air", "road")
CARGO_TYPES = ("ambient", "reefer", "frozen")
TRACKING_STATES = ("available", "unavailable", "pending", "not_started", "awaiting_reference", "none")
LABEL_COLORS = ("gray", "red", "orange", "amber", "green", "teal", "blue", "indigo", "purple", "pink")


class PlaceSchema(Schema):
    location = nullable_string("City or port, normalized, without country.")
    country = nullable_string("English country name.")
    timezone = fields.String(allow_none=True, metadata=doc(
        "UTC offset `+HH:MM` or `-HH:MM`, not an IANA name.", pattern=r"^[+-][0-9]{2}:[0-9]{2}$"))


class ContainerSchema(Schema):
    object = fields.Constant("container", metadata=doc("Always `container`."))
    id = Id("ctr")
    number = fields.String(allow_none=True, metadata=doc("ISO 6346: 4 letters and 7 digits.",
                                                         pattern="^[A-Z]{4}[0-9]{7}$"))
    seal_number = nullable_string("Seal number as written in documents.")
    vessel = nullable_string("Vessel as written in documents.")
    voyage = nullable_string("Voyage as written in documents.")
    port_of_loading = nullable_string("Port of loading as written in documents.")
    port_of_discharge = nullable_string("Port of discharge as written in documents.")
    etd = UtcDateTime(allow_none=True, metadata=doc("Estimated departure."))
    eta = UtcDateTime(allow_none=True, metadata=doc("Estimated arrival."))
    cargo_type = enum(CARGO_TYPES, "Cargo type.", allow_none=True)
    temperature_celsius = Number(allow_none=True, metadata=doc("Set point in degrees Celsius."))


class LabelSchema(Schema):
    object = fields.Constant("label", metadata=doc("Always `label`."))
    id = Id("lbl")
    name = fields.String(metadata=doc("Unique within the organization."))
    color = enum(LABEL_COLORS, "Colour name.", allow_none=True)
    color_hex = fields.String(metadata=doc("`#` followed by six hex digits.", pattern="^#[0-9a-f]{6}$"))


class CarrierSchema(Schema):
    name = nullable_string("Canonical spelling from tracking data.")
    scac = nullable_string("Standard Carrier Alpha Code.")


class TrackingSchema(Schema):
    state = enum(TRACKING_STATES, "Whether tracking data exists, is pending, unavailable or does not apply.")
    status = nullable_string("Carrier's latest status in the source's own words (open list).")
    unavailable_reason = enum(("unsupported_carrier", "invalid_reference", "not_found", "provider_error",
                               "past_voyage"), "Why tracking is unavailable.", allow_none=True)
    halted_reason = enum(("errored", "dropped"), "Why the feed halted; cleared when data flows again.",
                         allow_none=True)
    last_tracked_at = UtcDateTime(allow_none=True, metadata=doc("Last refresh by the service."))
    carrier_updated_at = UtcDateTime(allow_none=True, metadata=doc("Last publication by the carrier."))


class PartiesSchema(Schema):
    consignor = nullable_string("Consignor name.")
    consignee = nullable_string("Consignee name.")
    notify_party = nullable_string("Notify party name.")


class CargoSchema(Schema):
    pallets = fields.Integer(metadata=doc("Pallets, including those on no packing list."))
    boxes = fields.Integer(metadata=doc("Boxes on the packing lines."))
    net_weight_kg = Number(metadata=doc("Net weight in kilograms."))
    gross_weight_kg = Number(metadata=doc("Gross weight in kilograms."))


class CheckCountsSchema(Schema):
    total = fields.Integer(metadata=doc("All checks."))
    passed = fields.Integer(metadata=doc("Checks that passed."))
    failed = fields.Integer(metadata=doc("Checks that failed."))
    warnings = fields.Integer(metadata=doc("Checks with a warning."))
    skipped = fields.Integer(metadata=doc("Checks skipped."))
    pending = fields.Integer(metadata=doc("Checks not yet run."))


class ShipmentSchema(Schema):
    object = fields.Constant("shipment", metadata=doc("Always `shipment`."))
    id = Id("shp")
    reference = fields.String(metadata=doc(
        "Unique within the organization; `SHIP-<YYYYMMDD>-<4 characters>` unless a person set one."))
    erp_reference = nullable_string("The organization's own reference.")
    transport_reference = nullable_string(
        "Bill of lading, air waybill or container number, canonical (upper case without spaces or dashes; "
        "air waybills as `ddd-dddddddd`).")
    transport_reference_type = enum(("container", "awb", "bill_of_lading"),
                                    "Kind of transport reference; null when blank or matching none.",
                                    allow_none=True)
    transport_type = enum(TRANSPORT_TYPES, "Only ocean and air are tracked by a carrier feed.", allow_none=True)
    cargo_type = enum(CARGO_TYPES, "Cargo type.", allow_none=True)
    temperature_celsius = Number(allow_none=True, metadata=doc("Set point in degrees Celsius."))
    status = enum(SHIPMENT_STATUSES, "Shipment status.")
    archived = fields.Boolean(metadata=doc("Whether the shipment is archived."))
    archived_at = UtcDateTime(allow_none=True, metadata=doc("When it was archived."))
    validated_at = UtcDateTime(allow_none=True, metadata=doc(
        "First confirmation of key facts; stays set after later statuses."))
    approved_at = UtcDateTime(allow_none=True, metadata=doc(
        "Approval by a person, or automatically for a trusted sender."))
    origin = fields.Nested(PlaceSchema, metadata=doc("Where the shipment starts."))
    destination = fields.Nested(PlaceSchema, metadata=doc("Where the shipment ends."))
    etd = UtcDateTime(allow_none=True, metadata=doc("Estimated, later actual, departure."))
    eta = UtcDateTime(allow_none=True, metadata=doc("The carrier's or documents' latest arrival estimate."))
    effective_eta = UtcDateTime(allow_none=True, metadata=doc(
        "`eta` when set, else the earliest container `eta`, else null; the ETA filters compare against it."))
    original_eta = UtcDateTime(allow_none=True, metadata=doc("First arrival estimate recorded; never overwritten."))
    predicted_eta = UtcDateTime(allow_none=True, metadata=doc(
        "Separate prediction for the port of discharge; never overwrites `eta`."))
    carrier = fields.Nested(CarrierSchema, metadata=doc("The carrier."))
    tracking = fields.Nested(TrackingSchema, metadata=doc("Carrier tracking status."))
    parties = fields.Nested(PartiesSchema, metadata=doc("Parties named in the documents."))
    produce = fields.List(fields.String(), metadata=doc(
        "Distinct produce names, from packing lines or from the draft entry when no packing list has been read."))
    organic = fields.Boolean(metadata=doc("True when at least one visible packing line is organic."))
    cargo = fields.Nested(CargoSchema, metadata=doc("Totals; all zero when no packing list has been read."))
    containers = fields.List(fields.Nested(ContainerSchema), metadata=doc("Containers, oldest first."))
    labels = fields.List(fields.Nested(LabelSchema), metadata=doc("Labels, sorted by name."))
    checks = fields.Nested(CheckCountsSchema, metadata=doc("Counts of quality checks by status."))
    notes = nullable_string("Free text.")
    load_type = nullable_string("Load type (shown by the extended reference).")
    house_bl = nullable_string("House bill of lading (shown by the extended reference).")
    forwarder_reference = nullable_string("Forwarder's reference (shown by the extended reference).")
    forwarder_eta = UtcDateTime(allow_none=True, metadata=doc("Forwarder's arrival estimate."))
    created_at = UtcDateTime(metadata=doc("When the shipment was created."))
    updated_at = UtcDateTime(metadata=doc("When the shipment last changed."))
    revision = fields.Integer(metadata=doc(
        "1 when created, greater after each change to anything this object shows (containers, labels, cargo, "
        "checks, tracking and the effective ETA included); kept by the database. GET /changes lists shipments "
        "in the order of their latest change."))


class DeletedShipmentSchema(Schema):
    object = fields.Constant("shipment", metadata=doc("Always `shipment`."))
    id = Id("shp")
    deleted = fields.Constant(True, metadata=doc("Always true: drop this shipment from a copy."))
    revision = fields.Integer(metadata=doc("The shipment's revision after it was deleted or hidden."))
