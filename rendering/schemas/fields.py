"""Field types shared by every resource schema."""
import math
from datetime import timezone

from marshmallow import fields

from rendering.ids import format_id, id_pattern


def doc(description, **extra):
    """Field metadata for the OpenAPI description."""
    return {"description": description, **extra}


class Id(fields.String):
    """An integer primary key dumped as `<prefix>_<n>`."""

    def __init__(self, prefix, description="", **kwargs):
        self.prefix = prefix
        kwargs.setdefault("metadata", doc(description or f"`{prefix}_<int>`", pattern=id_pattern(prefix)))
        super().__init__(**kwargs)

    def _serialize(self, value, attr, obj, **kwargs):
        return format_id(self.prefix, value)


def utc_timestamp(value):
    """An aware datetime as the API writes it: UTC, ISO 8601 with a Z suffix, to the second; None stays None."""
    if value is None:
        return None
    # isoformat rather than strftime: it does less work, and this runs for every timestamp of every answer.
    return value.astimezone(timezone.utc).replace(microsecond=0, tzinfo=None).isoformat() + "Z"


class UtcDateTime(fields.DateTime):
    """A UTC timestamp written ISO 8601 with a Z suffix, to the second."""

    def _serialize(self, value, attr, obj, **kwargs):
        return utc_timestamp(value)


class Number(fields.Float):
    """A stored number; 'NaN' or an infinity, which JSON cannot write, is null.

    schema.sql's is_api_number keeps them out of the application's tables; this keeps a row stored before
    that rule from putting a bare NaN, which no JSON parser reads, in a page, an event or a webhook body.
    """

    def _serialize(self, value, attr, obj, **kwargs):
        number = super()._serialize(value, attr, obj, **kwargs)
        return number if number is None or math.isfinite(number) else None


class LocalDateTime(fields.DateTime):
    """A timestamp that keeps its local UTC offset (`+HH:MM`), to the second."""

    def _serialize(self, value, attr, obj, **kwargs):
        if value is None:
            return None
        text = value.replace(microsecond=0).isoformat()
        return text[:-6] + "Z" if text.endswith("+00:00") else text


# Where the description lists the known values of an open list (see docs/decisions.md).
KNOWN_VALUES = "x-known-values"


def known_values(values, description):
    """Field metadata for an open list: its known values in the text and in x-known-values, no `enum`."""
    values = list(values)
    listed = ", ".join(f"`{value}`" for value in values)
    # The spec: new values are added to every version and clients must not fail on them, so a
    # closed `enum` would make a strict generated client reject a response the API may send.
    return doc(f"{description} Known values: {listed}; others may be added.", **{KNOWN_VALUES: values})


def enum(values, description, **kwargs):
    """A string field documented with its known values (clients must accept others too)."""
    return fields.String(metadata=known_values(values, description), **kwargs)


def nullable_string(description):
    """A string field whose value may be null."""
    return fields.String(allow_none=True, metadata=doc(description))


class OneOf(fields.Field):
    """An item that is exactly one of several schemas' objects, already dumped by the view.

    Described as `oneOf` the schemas (api/openapi.py one_of_property); the view presents each item
    with its own schema, so this field only passes values through.
    """

    def __init__(self, schemas, **kwargs):
        self.schemas = tuple(schemas)
        super().__init__(**kwargs)
