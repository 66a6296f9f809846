"""The compiled dumper gives exactly what marshmallow's schema.dump gives, and refuses what it does not implement."""
import json
import sys
from collections import defaultdict
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path

import pytest
from marshmallow import Schema, fields, post_dump, pre_dump

from api.openapi import build_spec, documented_rules
import api.free_time as free_time_api
from models import db, shipments
from rendering import compiled
from rendering.compiled import UnsupportedSchema, dumper
from rendering.ids import PREFIXES, parse_id
from rendering.schemas.fields import OneOf
from rendering.schemas.free_time import FreeTimeSummarySchema
from rendering.schemas.organization import OrganizationSchema
from rendering.schemas.shipments import DeletedShipmentSchema, ShipmentSchema
from tests.support.factories import make_container, make_label, make_org, make_shipment

NOW = datetime(2026, 11, 23, 4, 42, 19, 433217, tzinfo=timezone.utc)
# Filters that make a list endpoint return all it can (its defaults hide some items).
FILTERS = {"/shipments": {"archived": "any"}, "/checks": {"status": "pending,passed,failed,skipped,warning"}}
_NOUNS = {prefix: noun for noun, prefix in PREFIXES.items()}


def test_shipments_from_the_database_dump_identically(conn):
    org_id = make_org(conn, "acme")
    rich = make_shipment(conn, org_id, erp_reference="PO-1", transport_reference="msku 123-4565",
                         transport_type="ocean", cargo_type="reefer", temperature_celsius=Decimal("-1.50"),
                         status="in_transit", archived=True, eta=NOW, etd=NOW - timedelta(days=20),
                         origin_location="Valparaiso", origin_country="Chile", origin_timezone="-03:00",
                         consignor="Frutas del Sur", draft_produce=["Avocado"], notes="fragile")
    make_shipment(conn, org_id)
    make_container(conn, rich, number="MSKU1234565", eta=NOW, temperature_celsius=Decimal("4.00"))
    make_label(conn, org_id, "urgent", "red", [rich])
    items = shipments.list_shipments(conn, org_id, 10)
    assert len(items) == 2
    schema = ShipmentSchema()
    assert [dumper(ShipmentSchema)(item) for item in items] == schema.dump(items, many=True)


@pytest.mark.parametrize("expires_at", [None, NOW])
def test_organization_dumps_identically(expires_at):
    organization = {"id": 7, "name": "Acme", "slug": "acme", "api_version": None,
                    "token": {"id": 3, "name": "ci", "scopes": ["read"], "expires_at": expires_at,
                              "user_email": "owner@acme.example"}}
    assert dumper(OrganizationSchema)(organization) == OrganizationSchema().dump(organization)


def _item_schemas(response):
    """The schema classes whose objects a view dumps: the item schemas of a list envelope, else the response."""
    data = response._declared_fields.get("data")
    if isinstance(data, fields.List) and isinstance(data.inner, fields.Nested):
        return {type(data.inner.schema)}
    if isinstance(data, fields.List) and isinstance(data.inner, OneOf):
        return set(data.inner.schemas)
    return {response}


def _checking_dumper(seen):
    """A stand-in for `dumper` that checks every dump against marshmallow and counts it in `seen`."""
    def checking(schema_class):
        compiled_dump, schema = dumper(schema_class), schema_class()

        def dump(obj):
            dumped, expected = compiled_dump(obj), schema.dump(obj)
            assert dumped == expected, schema_class.__name__
            # Same keys in the same order and the same JSON types (== holds for 1, 1.0 and True).
            assert json.dumps(dumped, default=str) == json.dumps(expected, default=str), schema_class.__name__
            seen[schema_class] += 1
            return dumped
        return dump
    return checking


def _harvest(body, pools):
    """Collect the ids a response shows, by noun, to fill path variables of later rules."""
    for item in body.get("data", [body]) if isinstance(body, dict) else ():
        value = item.get("id") if isinstance(item, dict) else None
        if isinstance(value, str) and "_" in value:
            prefix = value.split("_", 1)[0]
            if prefix in _NOUNS and parse_id(value, prefix) is not None:
                pools[_NOUNS[prefix] + "_id"].add(value)


def _pages(client, headers, path, query):
    """Every page of a list (following starting_after or next_since), or the one response of any other GET."""
    while True:
        response = client.get(path, headers=headers, query_string=query)
        assert response.status_code == 200, (path, query, response.json)
        yield response.json
        body = response.json
        if not (isinstance(body, dict) and body.get("has_more")):
            return
        # The change feed pages by its cursor; every other list by the last id.
        query = ({**query, "since": body["next_since"]} if "next_since" in body
                 else {**query, "starting_after": body["data"][-1]["id"]})


@pytest.fixture(scope="module")
def demo(demo_database):
    """An app on the session's demo data and the headers of a token of acme's owner."""
    return demo_database.app, demo_database.headers


def test_every_response_schema_dumps_identically_on_the_demo(demo, monkeypatch):
    app, headers = demo
    seen = defaultdict(int)
    checking = _checking_dumper(seen)
    # Views and webhooks reach the dumper through names imported from rendering.compiled.
    patched = [name for name, module in list(sys.modules.items())
               if module is not compiled and module is not sys.modules[__name__]
               and vars(module).get("dumper") is dumper]
    assert patched
    for name in patched:
        monkeypatch.setattr(sys.modules[name], "dumper", checking)
    # The at-risk list serves summaries this process kept from earlier tests without dumping them.
    monkeypatch.setattr(free_time_api, "_summaries", {})

    rules = [(rule, doc) for _path, rule, doc in documented_rules(app)
             if isinstance(doc.response, type) and issubclass(doc.response, Schema)]
    # Rules without variables first: their lists supply the ids of the others (shipments, then documents).
    rules.sort(key=lambda pair: (len(pair[0].arguments), "document_id" in pair[0].arguments))
    pools = defaultdict(set)
    client = app.test_client()
    by_rule = {}
    cleaner = db.connect(app.config["DATABASE_URL"])
    cleaner.autocommit = True
    for rule, doc in rules:
        # Stored shipment renderings are served without dumping: every rule starts without any.
        cleaner.cursor().execute("DELETE FROM shipment_renderings")
        before = sum(seen.values())
        query = {**FILTERS.get(rule.rule, {})}
        if doc.query is not None and "limit" in doc.query._declared_fields:
            query["limit"] = 100
        (variable,) = rule.arguments or (None,)
        paths = [rule.rule] if variable is None else [rule.rule.replace(f"<{variable}>", value)
                                                      for value in _spread(pools[variable])]
        for path in paths:
            for body in _pages(client, headers, path, query):
                _harvest(body, pools)
        by_rule[rule.rule] = sum(seen.values()) - before
    cleaner.close()

    # Every documented rule with a schema dumped at least one object, so none is checked on nothing.
    assert not [rule for rule, count in by_rule.items() if count == 0]
    # The schemas checked are exactly the response schemas of the description, item schemas for lists.
    # The demo hides or deletes no shipment it showed, so /changes has no deleted item: dump one here.
    checking(DeletedShipmentSchema)({"id": 7, "revision": 3, "deleted": True})
    assert set(seen) == set().union(*(_item_schemas(doc.response) for _rule, doc in rules))
    assert len(pools["shipment_id"]) >= 250 and pools["document_id"]
    # Webhook bodies (named schemas of their own, api/webhook_description.py) embed response schemas only
    # (Shipment, MonitoringAlert), so they are checked too.
    document = build_spec(app)
    bodies = {ref.rsplit("/", 1)[1] for ref in _refs(document["webhooks"])}
    webhook_refs = {ref.rsplit("/", 1)[1] for ref in _refs([document["components"]["schemas"][name] for name in bodies])}
    assert webhook_refs and webhook_refs <= {cls.__name__.removesuffix("Schema") for cls in seen}


def _spread(ids, at_most=300):
    """At most `at_most` of `ids`, spread evenly: every shipment, one document in eight (each is listed anyway)."""
    ordered = sorted(ids, key=lambda value: int(value.rsplit("_", 1)[1]))
    return ordered[::-(-len(ordered) // at_most)] if ordered else []


def _refs(node):
    """Every `$ref` value inside a JSON-like document."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from [value] if key == "$ref" else _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)


# Each entry: a schema using one feature the dumper does not implement, and the words naming it.
class _Child(Schema):
    name = fields.String()
    size = fields.Integer()


class _WithPreDump(Schema):
    name = fields.String()

    @pre_dump
    def _rename(self, obj, **kwargs):
        return obj


class _WithPostDump(Schema):
    name = fields.String()

    @post_dump(pass_original=True)
    def _rename(self, data, obj, **kwargs):
        return data


class _WithGetAttribute(Schema):
    name = fields.String()

    def get_attribute(self, obj, attr, default):
        return super().get_attribute(obj, attr, default)


class _Many(Schema):
    class Meta:
        many = True

    name = fields.String()


class _MetaExcludeNested(Schema):
    class Meta:
        exclude = ("child.size",)

    child = fields.Nested(_Child)


class _OrderedDictClass(Schema):
    dict_class = type("OrderedishDict", (dict,), {})
    name = fields.String()


class _Recursive(Schema):
    name = fields.String()
    parent = fields.Nested(lambda: _Recursive())


class _WithMethod(Schema):
    total = fields.Method("get_total")

    def get_total(self, obj):
        return 1


class _Custom(fields.String):
    def serialize(self, attr, obj, accessor=None, **kwargs):
        return super().serialize(attr, obj, accessor, **kwargs)


def _with(**declared):
    return Schema.from_dict(declared, name="Generated")


REFUSED = {
    "pre_dump": (_WithPreDump, "@pre_dump hook _rename"),
    "post_dump": (_WithPostDump, "@post_dump hook _rename"),
    "get_attribute": (_WithGetAttribute, "custom get_attribute()"),
    "meta_many": (_Many, "Meta.many"),
    "dict_class": (_OrderedDictClass, "dict_class OrderedishDict"),
    "nested_only": (_with(child=fields.Nested(_Child, only=("name",))), "only/exclude on a nested schema"),
    "nested_exclude": (_with(child=fields.Nested(_Child, exclude=("size",))), "only/exclude on a nested schema"),
    "nested_instance_only": (_with(child=fields.Nested(_Child(only=("name",)))),
                             "only/exclude on a nested schema instance"),
    "meta_exclude_dotted": (_MetaExcludeNested, "only/exclude on a nested schema"),
    "list_nested_only": (_with(children=fields.List(fields.Nested(_Child, only=("name",)))),
                         "only/exclude on a nested schema"),
    "method": (_WithMethod, "fields.Method"),
    "function": (_with(total=fields.Function(lambda obj: 1)), "fields.Function"),
    "pluck": (_with(child=fields.Pluck(_Child, "name")), "fields.Pluck"),
    "dump_default": (_with(name=fields.String(dump_default="none")), "dump_default"),
    "inner_dump_default": (_with(names=fields.List(fields.String(dump_default="x"))), "dump_default"),
    "custom_serialize": (_with(name=_Custom()), "_Custom with a custom serialize()"),
    "dotted_attribute": (_with(name=fields.String(attribute="child.name")), "dotted attribute 'child.name'"),
    "self_nesting": (_Recursive, "a schema nested in itself"),
    "nested_hook": (_with(child=fields.Nested(_WithPostDump)), "_WithPostDump: @post_dump hook _rename"),
}


@pytest.mark.parametrize("feature", sorted(REFUSED))
def test_unimplemented_features_are_refused_when_built(feature):
    schema_class, words = REFUSED[feature]
    with pytest.raises(UnsupportedSchema) as raised:
        dumper(schema_class)
    # Named by the schema (and field) concerned; a nested schema's own feature names the nested schema.
    assert words in str(raised.value)
    assert schema_class.__name__ in str(raised.value) or feature == "nested_hook"


class _MetaOptions(Schema):
    class Meta:
        exclude = ("secret",)
        datetimeformat = "%Y/%m/%d"

    name = fields.String(data_key="title")
    secret = fields.String()
    at = fields.DateTime()
    child = fields.Nested(_Child, allow_none=True)
    children = fields.List(fields.Nested(_Child))
    kind = fields.Constant("thing")


@pytest.mark.parametrize("obj", [
    {"name": "a", "secret": "s", "at": NOW, "child": {"name": "c", "size": 2}, "children": []},
    {"name": None, "secret": None, "at": None, "child": None, "children": [{"name": "d", "size": None}]},
])
def test_what_is_implemented_dumps_identically(obj):
    assert dumper(_MetaOptions)(obj) == _MetaOptions().dump(obj)


@pytest.mark.parametrize("field, value", [
    (fields.String(), b"bytes"), (fields.Boolean(), "false"), (fields.Boolean(), 0), (fields.Integer(), True),
    (fields.Integer(as_string=True), 7), (fields.Float(), 2), (fields.Float(as_string=True), 2.5),
    (fields.Date(), date(2026, 1, 2)), (fields.Decimal(), Decimal("1.50")),
])
def test_scalars_convert_as_marshmallow_does(field, value):
    schema_class = _with(value=field)
    dumped, expected = dumper(schema_class)({"value": value}), schema_class().dump({"value": value})
    assert (dumped, type(dumped["value"])) == (expected, type(expected["value"]))


def test_free_time_summary_builds_without_hooks():
    assert callable(dumper(FreeTimeSummarySchema))


# marshmallow's private names rendering/compiled.py reads: an upgrade that renames or drops one fails here, by
# name, rather than in the first request that builds a dumper.
MARSHMALLOW_PRIVATE = [(Schema, "_hooks"), (Schema, "_serialize"), (Schema, "_invoke_dump_processors"),
                       (fields.Field, "_serialize"), (fields.Field, "_CHECK_ATTRIBUTE")]


@pytest.mark.parametrize("owner, name", MARSHMALLOW_PRIVATE, ids=[f"{o.__name__}.{n}" for o, n in MARSHMALLOW_PRIVATE])
def test_marshmallow_still_has_what_the_dumper_reads(owner, name):
    assert hasattr(owner, name)
    # And the dumper does read it (a name it stopped reading is struck from the list).
    assert name in Path(compiled.__file__).read_text()
