"""FreeTimeSummary and FreeTimeClock; the rules behind each field are in docs/free-time.md."""
from marshmallow import Schema, fields

from models.free_time import STATES
from models.free_time_rules import BASES, KINDS, SOURCES
from rendering.schemas.fields import Id, doc, enum


def _day(description):
    return fields.Date(allow_none=True, metadata=doc(description + " `YYYY-MM-DD`, the port's local day."))


def _count(description):
    return fields.Integer(allow_none=True, metadata=doc(description))


class FreeTimeClockSchema(Schema):
    object = fields.Constant("free_time_clock", metadata=doc("Always `free_time_clock`."))
    kind = enum(KINDS, "`demurrage` (container at the terminal) or `detention` (container out of it).")
    container_number = fields.String(metadata=doc("ISO 6346 container number."))
    state = enum(STATES, "`not_started` until the start event (discharge, gate-out); `running` within free "
                         "time; `overdue` past the last free day; `stopped` at the stop event (gate-out, "
                         "empty return); `given_up` when the clock cannot be counted (start or stop never "
                         "recorded, tracking ended, cargo already in the warehouse).")
    # Null rather than a made-up number: no source supplied the free days (free_days_source `unknown`).
    free_days = fields.Integer(allow_none=True, metadata=doc(
        "Free days agreed; null when no source supplies them (`free_days_source` is then `unknown`)."))
    free_days_source = enum(SOURCES, "Where the free days come from: the shipment itself, else the latest "
                                     "arrival notice stating them, else the organization's terms for the "
                                     "carrier (`carrier`); `unknown` when none does.")
    free_days_basis = enum(BASES, "`calendar` (every day counts) or `working` (Monday to Friday count); "
                                  "`calendar` when the source does not say or terms are unknown.")
    started_on = _day("Day of the start event (discharge or gate-out); null until then.")
    ended_on = _day("Day of the stop event (gate-out or empty return); null until then.")
    last_free_day = _day("Last day without charge; null until started or when free days are unknown.")
    days_left = _count("Free days left after today; negative (minus overdue_days) when overdue; null unless "
                       "the clock is running or overdue with known free days.")
    elapsed_days = _count("Days on the clock, the start day and today (or the end day) included; null "
                          "when not started or given up.")
    used_days = _count("Free days consumed (on the basis); null when not started, given up, or free days "
                       "unknown.")
    overdue_days = _count("Calendar days past the last free day, through today or the end day; null when "
                          "not started, given up, or free days unknown.")
    carrier = fields.String(allow_none=True, metadata=doc("The shipment's carrier name; null when not known."))


class FreeTimeSummarySchema(Schema):
    object = fields.Constant("free_time_summary", metadata=doc("Always `free_time_summary`."))
    shipment_id = Id("shp")
    shipment_reference = fields.String(metadata=doc("The shipment's reference."))
    transport_reference = fields.String(allow_none=True, metadata=doc("The shipment's transport reference."))
    at_risk = fields.Boolean(metadata=doc(
        "True when a demurrage clock runs with known free days and 2 or fewer days are left, or it is "
        "overdue; never true with unknown terms."))
    terms_unknown = fields.Boolean(metadata=doc(
        "True when free days are supplied by none of: the shipment, an arrival notice, the organization's "
        "carrier terms. Always false for shipments that are not ocean: only ocean shipments have clocks, so "
        "no free days are missing."))
    demurrage = fields.List(fields.Nested(FreeTimeClockSchema), metadata=doc(
        "One per container, in the shipment's container order; empty for non-ocean shipments or without "
        "relevant tracking events."))
    detention = fields.List(fields.Nested(FreeTimeClockSchema), metadata=doc(
        "One per container, same order as demurrage; empty for non-ocean shipments."))
    active_clock = fields.Nested(FreeTimeClockSchema, allow_none=True, metadata=doc(
        "The most urgent demurrage clock while demurrage has not finished (a not_started one counts); once "
        "demurrage has stopped or given up, the most urgent running detention clock; null when no clocks "
        "or nothing to watch."))

