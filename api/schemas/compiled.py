"""Fast dumping derived from a marshmallow schema.

marshmallow spends about 2 µs of bookkeeping per field; a page of 100 shipments has some
10,000 fields, which made serialisation the largest cost of `GET /shipments`. `dumper(schema)`
walks the schema's declared fields once and returns a plain function doing the same work:
built-in scalar fields convert as marshmallow does, every other field calls its own
`_serialize`, nested schemas recurse. The schema stays the single definition (and the source of
/openapi.json); tests/test_compiled_dump.py checks the result equals `schema.dump()`.
"""
from functools import lru_cache

from marshmallow import fields


def _scalar(convert):
    return lambda value: None if value is None else convert(value)


_BUILTIN = {
    fields.String: _scalar(str),
    fields.Integer: _scalar(int),
    fields.Float: _scalar(float),
    fields.Boolean: _scalar(bool),
}


def _converter(field):
    """A function value -> dumped value for one field."""
    if isinstance(field, fields.Nested):
        nested = dumper(type(field.schema))
        if field.many:
            return lambda value: None if value is None else [nested(item) for item in value]
        return lambda value: None if value is None else nested(value)
    if isinstance(field, fields.List):
        inner = _converter(field.inner)
        return lambda value: None if value is None else [inner(item) for item in value]
    builtin = _BUILTIN.get(type(field))
    if builtin is not None:
        return builtin
    return lambda value, field=field: field._serialize(value, None, None)


@lru_cache(maxsize=None)
def dumper(schema_class):
    """A function that dumps one object exactly as `schema_class().dump(obj)` would."""
    schema = schema_class()
    steps = []
    for name, field in schema.dump_fields.items():
        key = field.data_key or name
        if isinstance(field, fields.Constant):
            steps.append((key, None, field.constant))
        else:
            steps.append((key, field.attribute or name, _converter(field)))

    def dump(obj):
        return {key: (convert if attribute is None else convert(obj.get(attribute)))
                for key, attribute, convert in steps}

    return dump
