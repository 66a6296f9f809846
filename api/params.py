"""Query-parameter fields and the one parser every view uses.

Decisions on input the spec leaves open are in docs/parameters.md.
"""
import functools
import re
from datetime import date, datetime, time, timezone

from flask import request
from marshmallow import EXCLUDE, Schema, ValidationError, fields

from api.errors import InvalidParameter
from rendering.ids import CHANGE_CURSOR_PATTERN, id_pattern, parse_id

_DIGITS = re.compile(r"[0-9]{1,3}", re.ASCII)
# Only real calendar days of years 0001 to 9999 (29 February in leap years), hours 00-23, minutes
# and seconds 00-59: a client reading the description's pattern can tell every date the API takes.
_YEAR = r"([0-9]{3}[1-9]|[0-9]{2}[1-9]0|[0-9][1-9]00|[1-9]000)"
_LEAP_YEAR = r"([0-9]{2}(0[48]|[2468][048]|[13579][26])|([02468][48]|[13579][26]|[2468]0)00)"
_DATE_TEXT = (rf"({_YEAR}-((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|(0[469]|11)-(0[1-9]|[12][0-9]|30)"
              rf"|02-(0[1-9]|1[0-9]|2[0-8]))|{_LEAP_YEAR}-02-29)")
_TIME_TEXT = (r"T([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9](\.[0-9]{1,6})?)?"
              r"(Z|[+-]([01][0-9]|2[0-3])(:?[0-5][0-9])?)?")
_DATE = re.compile(_DATE_TEXT, re.ASCII)
_DATE_TIME = re.compile(_DATE_TEXT + _TIME_TEXT, re.ASCII)
# What the description publishes for time parameters: exactly the syntax parse_time reads.
TIME_PATTERN = f"^{_DATE_TEXT}({_TIME_TEXT})?$"
_BRACKETED = re.compile(r"([^\[\]]*)\[")
MAX_VALUE_LENGTH = 500

# Parameter Object attributes (not schema keywords) a field declares in metadata["parameter"];
# api/openapi.py copies them into the description through parameter_attributes.
OPTIONAL = {"allowEmptyValue": True}


def comma_list_schema(item):
    """The schema of one comma-separated value whose items match the regular expression `item`."""
    # A string, not an array with `style: form, explode: false`: generators such as openapi-python-client
    # ignore `explode: false` and send `status=a&status=b`, of which the spec has the API use only the last.
    # Its maxLength is parse_query's, so the length a client may send is part of the description.
    return {"type": "string", "pattern": f"^({item})(,({item}))*$", "maxLength": MAX_VALUE_LENGTH}


def parameter_attributes(converter, field, **kwargs):
    """apispec parameter attribute function: the attributes in the field's metadata["parameter"]."""
    return dict(field.metadata.get("parameter", {}))


class Limit(fields.Integer):
    """Page size: decimal digits only, 1 to 100."""

    def __init__(self, default=25, **kwargs):
        kwargs.setdefault("load_default", default)
        kwargs.setdefault("metadata", {"description": "Page size, 1 to 100 (decimal digits only).",
                                       "minimum": 1, "maximum": 100, "default": default})
        super().__init__(**kwargs)

    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, str) or not _DIGITS.fullmatch(value) or not 1 <= int(value) <= 100:
            raise ValidationError("limit must be an integer from 1 to 100, written in decimal digits.")
        return int(value)


class PrefixedId(fields.String):
    """An id of one kind (`shp_42`) loaded as its integer."""

    def __init__(self, prefix, description, **kwargs):
        self.prefix = prefix
        metadata = {"description": description + " Empty means omitted.", "pattern": id_pattern(prefix),
                    "parameter": OPTIONAL}
        super().__init__(metadata=metadata, **kwargs)

    def _deserialize(self, value, attr, data, **kwargs):
        object_id = parse_id(value, self.prefix)
        if object_id is None:
            raise ValidationError(f"{attr} must be an id of the form {self.prefix}_<positive integer>.")
        return object_id


class ChangeCursor(fields.String):
    """A position in GET /changes: `<transaction>.<shipment number>` as a previous page gave it."""

    PATTERN = CHANGE_CURSOR_PATTERN
    START = (0, 0)

    def __init__(self, description, **kwargs):
        metadata = {"description": description + " Empty means omitted.", "pattern": self.PATTERN,
                    "maxLength": 40, "parameter": OPTIONAL}
        super().__init__(metadata=metadata, **kwargs)

    def _deserialize(self, value, attr, data, **kwargs):
        match = re.fullmatch(self.PATTERN, value, re.ASCII)
        if match is None or int(match.group(1)) >= 2 ** 64 or int(match.group(2)) >= 2 ** 63:
            raise ValidationError(f"{attr} must be a cursor as `next_since` gave it, such as 0.0.")
        return int(match.group(1)), int(match.group(2))

    @staticmethod
    def format(position):
        """The text of a (transaction, shipment number) position."""
        return "{}.{}".format(*position)


class CommaSeparated(fields.String):
    """One value holding a comma-separated list of allowed words; empty means omitted."""

    def __init__(self, choices, description, **kwargs):
        self.choices = tuple(choices)
        metadata = {"description": description + " Comma-separated; any of: " + ", ".join(self.choices) + ".",
                    **comma_list_schema("|".join(map(re.escape, self.choices))), "parameter": OPTIONAL}
        if isinstance(kwargs.get("load_default"), (list, tuple)):
            # The text a client sends, not the repr of a Python list.
            metadata["default"] = ",".join(kwargs["load_default"])
        super().__init__(metadata=metadata, **kwargs)

    def _deserialize(self, value, attr, data, **kwargs):
        items = value.split(",")
        unknown = [item for item in items if item not in self.choices]
        if unknown:
            raise ValidationError(f"{attr} has an unknown value {unknown[0]!r}; "
                                  f"allowed: {', '.join(self.choices)}.")
        return list(dict.fromkeys(items))


class IdList(fields.String):
    """A comma-separated list of ids of one kind, loaded as integers."""

    def __init__(self, prefix, description, **kwargs):
        self.prefix = prefix
        metadata = {"description": description + f" Comma-separated `{prefix}_` ids; empty means omitted.",
                    **comma_list_schema(id_pattern(prefix).strip("^$")), "parameter": OPTIONAL}
        super().__init__(metadata=metadata, **kwargs)

    def _deserialize(self, value, attr, data, **kwargs):
        object_ids = [parse_id(item, self.prefix) for item in value.split(",")]
        if None in object_ids:
            raise ValidationError(f"{attr} must be a comma-separated list of {self.prefix}_<positive integer> ids.")
        return list(dict.fromkeys(object_ids))


class Choice(fields.String):
    """One word out of a fixed list."""

    def __init__(self, choices, description, **kwargs):
        self.choices = tuple(choices)
        metadata = {"description": description + " Empty means omitted.", "enum": list(self.choices),
                    "parameter": OPTIONAL}
        super().__init__(metadata=metadata, **kwargs)

    def _deserialize(self, value, attr, data, **kwargs):
        if value not in self.choices:
            raise ValidationError(f"{attr} must be one of: {', '.join(self.choices)}.")
        return value


class TimeParam(fields.String):
    """An ISO 8601 date-time (UTC when it has no offset) or a bare date (midnight UTC)."""

    def __init__(self, description, **kwargs):
        metadata = {"description": description + " An ISO 8601 date-time (`2026-03-03T12:00:00Z`; seconds, up "
                                                  "to 6 fractional digits and the offset may be left out, no "
                                                  "offset is UTC, offsets up to ±23:59) or a date (`2026-03-03`, "
                                                  "midnight UTC at the start of that day); a real calendar day, "
                                                  "within years 1 to 9999 in UTC. Empty means omitted.",
                    "pattern": TIME_PATTERN, "parameter": OPTIONAL}
        super().__init__(metadata=metadata, **kwargs)

    def _deserialize(self, value, attr, data, **kwargs):
        parsed = parse_time(value)
        if parsed is None:
            raise ValidationError(f"{attr} must be an ISO 8601 date-time or a date (YYYY-MM-DD).")
        try:
            # PostgreSQL refuses offsets beyond 15:59 that ISO 8601 and Python allow (up to 23:59),
            # so the query only ever receives UTC.
            return parsed.astimezone(timezone.utc)
        except OverflowError:
            raise ValidationError(f"{attr} must fall between 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z "
                                  f"once converted to UTC.") from None


def parse_time(value):
    """A timezone-aware datetime from an ISO 8601 date-time or date (offset up to ±23:59), else None."""
    # An unencoded '+' in a query string arrives as a space: '...T10:00:00 02:00'.
    value = re.sub(r" ([0-9]{2}(:?[0-9]{2})?)$", r"+\1", value)
    try:
        if _DATE.fullmatch(value):
            return datetime.combine(date.fromisoformat(value), time(0), tzinfo=timezone.utc)
        if _DATE_TIME.fullmatch(value):
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
            return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)
    except ValueError:
        return None
    return None


class QuerySchema(Schema):
    """Base of every XListQuerySchema: unknown parameters are ignored."""

    class Meta:
        unknown = EXCLUDE


@functools.cache
def _query_schema(schema_class):
    """One instance per query schema, made once: loading keeps no state in it, and making one per request
    would copy its declared fields on every request."""
    return schema_class()


def parse_query(schema_class):
    """Load request.args with `schema_class`; any problem is a 400 invalid_parameter naming the parameter."""
    schema = _query_schema(schema_class)
    names = {field.data_key or name for name, field in schema.fields.items()}
    for key in request.args.keys():
        bracketed = _BRACKETED.match(key)
        if bracketed and bracketed.group(1) in names:
            name = bracketed.group(1)
            raise InvalidParameter(f"{name} takes a single value; array and hash forms such as "
                                   f"{name}[] are not accepted.", param=name)
    # A repeated parameter: the last occurrence is used.
    data = {key: request.args.getlist(key)[-1] for key in names if key in request.args}
    for key, value in data.items():
        # PostgreSQL text cannot hold NUL, and nothing we match is longer than this.
        if "\x00" in value or len(value) > MAX_VALUE_LENGTH:
            raise InvalidParameter(f"{key} must be at most {MAX_VALUE_LENGTH} characters, without NUL.",
                                   param=key)
    # An empty value of an optional filter means the filter is omitted; limit must not be empty.
    data = {key: value for key, value in data.items() if value != "" or key == "limit"}
    try:
        return schema.load(data)
    except ValidationError as error:
        param, messages = next(iter(error.normalized_messages().items()))
        raise InvalidParameter(messages[0] if isinstance(messages, list) else str(messages), param=param)
