"""Fast dumping derived from a marshmallow schema.

marshmallow pays its bookkeeping on every field it dumps (a call through `serialize` and `get_value`
per field, the hooks and the error store per object): it dumps an object in about twice the time the
work takes. Everything the API and the webhooks show is dumped here: each request of the views that
dump per request (a timeline, checks, alerts, documents), each shipment rendered on a miss, each
webhook body. docs/performance.md has the figures (`bench/dump_cost.py`: this against `Schema.dump`).
`dumper(schema)` walks the schema's declared fields once and returns a plain function doing the same
work: built-in scalar fields convert as marshmallow does, every other field calls its own
`_serialize`, nested schemas recurse. The schema stays the single definition (and the source of
/openapi.json); tests/api/test_compiled_dump.py checks the result equals `schema.dump()` for every
response schema on the demo data, and names the private parts of marshmallow read here, so that an
upgrade which moves one fails there.

Only that much of marshmallow is implemented, so `dumper()` refuses, when it builds, a schema
using anything else (hooks, `only`/`exclude` on a nested schema, fields computed from the whole
object, defaults, custom attribute access): ignoring them would silently dump something else than
the schema says. Meta `fields`, `exclude`, `load_only`, `include` and the date formats need
nothing of their own: they are already applied to the schema's bound `dump_fields`. Objects are
mappings holding every key: a missing key dumps null, where marshmallow would leave the field out.
"""
import threading
from functools import lru_cache

from marshmallow import Schema, fields, missing
from marshmallow.decorators import POST_DUMP, PRE_DUMP


class UnsupportedSchema(TypeError):
    """A schema uses a marshmallow feature the compiled dumper does not implement."""

    def __init__(self, where, feature):
        super().__init__(f"{where}: {feature} is not implemented by rendering.compiled.dumper; "
                         f"drop it from the schema or dump with marshmallow")


# Types whose values, when already of that exact type, marshmallow returns unchanged (or as an
# equal copy); anything else (bytes, "false", Decimal, bool for Integer) takes the field's own path.
_EXACT = {fields.String: str, fields.Integer: int, fields.Float: float, fields.Boolean: bool}
# Fields that read the whole object rather than one attribute of it: the dumper hands them no object.
_WHOLE_OBJECT = {fields.Method: "fields.Method", fields.Function: "fields.Function"}
# Schema methods the dumper bypasses: overriding one changes what marshmallow dumps.
_SCHEMA_METHODS = ("get_attribute", "dump", "_serialize", "_invoke_dump_processors")
# Field methods the dumper bypasses (it calls `_serialize` on the attribute's value directly).
_FIELD_METHODS = ("serialize", "get_value")
# Schemas whose dumper this thread is building: a schema nesting itself would otherwise recurse
# forever. Per thread, since two first requests may build the same dumper at once.
_local = threading.local()


def _refuse_schema(schema):
    name = type(schema).__name__
    for tag in (PRE_DUMP, POST_DUMP):
        hooks = schema._hooks.get(tag)
        if hooks:
            raise UnsupportedSchema(name, f"@{tag} hook {', '.join(hook[0] for hook in hooks)}")
    for method in _SCHEMA_METHODS:
        if getattr(type(schema), method) is not getattr(Schema, method):
            raise UnsupportedSchema(name, f"a custom {method}()")
    if schema.dict_class is not dict:
        raise UnsupportedSchema(name, f"dict_class {schema.dict_class.__name__}")
    if schema.many:
        raise UnsupportedSchema(name, "Meta.many")


def _refuse_field(where, field):
    """Raise UnsupportedSchema when `field`, or a field inside it, needs what the dumper skips."""
    kind = type(field)
    for refused, feature in _WHOLE_OBJECT.items():
        if isinstance(field, refused):
            raise UnsupportedSchema(where, feature)
    if isinstance(field, fields.Pluck):
        raise UnsupportedSchema(where, "fields.Pluck")
    if not field._CHECK_ATTRIBUTE and not isinstance(field, fields.Constant):
        raise UnsupportedSchema(where, f"{kind.__name__}, a field not read from an attribute")
    for method in _FIELD_METHODS:
        if getattr(kind, method) is not getattr(fields.Field, method):
            raise UnsupportedSchema(where, f"{kind.__name__} with a custom {method}()")
    # Constant keeps its value in dump_default; it is dumped as the constant.
    if field.dump_default is not missing and not isinstance(field, fields.Constant):
        raise UnsupportedSchema(where, "dump_default")
    if isinstance(field, fields.Nested):
        if field.only is not None or field.exclude:
            raise UnsupportedSchema(where, "only/exclude on a nested schema")
        # A schema instance given to Nested keeps its own only/exclude/load_only; the dumper
        # rebuilds the nested schema from its class, so it must dump the same fields.
        if list(field.schema.dump_fields) != list(type(field.schema)().dump_fields):
            raise UnsupportedSchema(where, "only/exclude on a nested schema instance")
    inner = [getattr(field, "inner", None), getattr(field, "key_field", None), getattr(field, "value_field", None),
             *getattr(field, "tuple_fields", ())]
    for each in inner:
        if each is not None:
            _refuse_field(where, each)


def _converter(field):
    """A function value -> dumped value for one field."""
    if isinstance(field, fields.Nested):
        nested = dumper(type(field.schema))
        if field.many or field.schema.many:
            return lambda value: None if value is None else [nested(item) for item in value]
        return lambda value: None if value is None else nested(value)
    if isinstance(field, fields.List):
        inner = _converter(field.inner)
        return lambda value: None if value is None else [inner(item) for item in value]
    serialize = field._serialize
    exact = _EXACT.get(type(field))
    if exact is not None and not getattr(field, "as_string", False):
        return lambda value: value if value.__class__ is exact or value is None else serialize(value, None, None)
    return lambda value: serialize(value, None, None)


@lru_cache(maxsize=None)
def dumper(schema_class):
    """A function that dumps one object exactly as `schema_class().dump(obj)` would; raises UnsupportedSchema."""
    building = _local.__dict__.setdefault("building", set())
    if schema_class in building:
        raise UnsupportedSchema(schema_class.__name__, "a schema nested in itself")
    building.add(schema_class)
    try:
        schema = schema_class()
        _refuse_schema(schema)
        steps = []
        for name, field in schema.dump_fields.items():
            where = f"{schema_class.__name__}.{name}"
            _refuse_field(where, field)
            key = field.data_key or name
            attribute = field.attribute or name
            if isinstance(field, fields.Constant):
                steps.append((key, None, field.constant))
            elif "." in attribute:
                # marshmallow reads `a.b` as obj["a"]["b"]; the dumper reads one key.
                raise UnsupportedSchema(where, f"dotted attribute {attribute!r}")
            else:
                steps.append((key, attribute, _converter(field)))
    finally:
        building.discard(schema_class)

    def dump(obj):
        return {key: (convert if attribute is None else convert(obj.get(attribute)))
                for key, attribute, convert in steps}

    return dump
