"""GET /openapi.json: a valid OpenAPI 3.1 description, public and cacheable, matching the routes and responses."""
import json
import os
import re
import subprocess
import sys

import pytest
from openapi_spec_validator import validate

from api import guard
from api.openapi import UndocumentedView, build_spec

from rendering.ids import PREFIXES, id_pattern
from tests.support import ROOT
from tests.support.apps import with_limits
from tests.support.factories import auth, make_container, make_label, make_org, make_shipment, make_token


def test_valid_openapi_31_without_token(client):
    response = client.get("/openapi.json")
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/json"
    assert response.headers["Cache-Control"] == "public, max-age=3600"
    assert "Service-Version" not in response.headers
    document = response.json
    assert document["openapi"] == "3.1.0"
    assert document["info"]["version"] == "2026-10-01"
    validate(document)


@pytest.mark.parametrize("hash_seed", ["1", "2"])
def test_same_bytes_from_every_process(client, database_url, hash_seed):
    # Built anew in another process, with another order of its sets and dicts of strings: a description that
    # depended on either would differ between the workers of one instance, and between instances.
    result = subprocess.run([sys.executable, "-m", "flask", "--app", "app", "openapi", "print"], cwd=ROOT,
                            capture_output=True, timeout=120,
                            env={**os.environ, "DATABASE_URL": database_url, "PYTHONHASHSEED": hash_seed})
    assert result.returncode == 0, result.stderr
    in_order = {"object_pairs_hook": list}  # every key in its place: the same document, written the same way
    assert json.loads(result.stdout, **in_order) == json.loads(client.get("/openapi.json").data, **in_order)


def test_documents_the_foundation_endpoints(client):
    document = client.get("/openapi.json").json
    operations = {(path, method): operation for path, item in document["paths"].items()
                  for method, operation in item.items()}
    ids = {key: operation["operationId"] for key, operation in operations.items()}
    assert ids[("/organization", "get")] == "get_organization"
    assert ids[("/shipments", "get")] == "list_shipments"
    assert ids[("/shipments/{shipment_id}", "get")] == "get_shipment"
    assert ids[("/openapi.json", "get")] == "get_openapi_document"
    assert all(method == "get" for _path, method in operations)
    assert operations[("/openapi.json", "get")]["security"] == []
    assert document["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"


def test_list_shipments_parameters(client):
    document = client.get("/openapi.json").json
    parameters = document["paths"]["/shipments"]["get"]["parameters"]
    query = {p["name"]: p for p in parameters if isinstance(p, dict) and p.get("in") == "query"}
    assert set(query) == {"q", "status", "labels", "archived", "created_after", "created_before", "eta_after",
                          "eta_before", "limit", "starting_after"}
    assert query["limit"]["schema"]["minimum"] == 1
    assert query["limit"]["schema"]["maximum"] == 100
    assert query["limit"]["schema"]["default"] == 25
    assert query["starting_after"]["schema"]["pattern"] == "^shp_[1-9][0-9]{0,17}$"
    assert query["archived"]["schema"]["enum"] == ["false", "true", "any"]
    assert not any(p["required"] for p in query.values() if "required" in p)


def test_error_schema_lists_every_code(client):
    schemas = client.get("/openapi.json").json["components"]["schemas"]
    error = schemas["ErrorDetail"]["properties"]
    assert set(error["code"]["x-known-values"]) >= {"invalid_parameter", "invalid_version", "missing_token",
                                          "invalid_token", "insufficient_scope", "resource_missing",
                                          "rate_limited"}
    assert set(error["type"]["x-known-values"]) >= {"invalid_request_error", "authentication_error", "permission_error",
                                          "not_found_error", "rate_limit_error"}


def test_schemas_describe_the_real_responses(conn, client):
    token = make_token(conn, make_org(conn, "acme"))
    shipment = make_shipment(conn, 1)
    make_container(conn, shipment)
    make_label(conn, 1, "red", shipment_ids=[shipment])
    schemas = client.get("/openapi.json").json["components"]["schemas"]
    body = client.get(f"/shipments/shp_{shipment}", headers=auth(token)).json
    assert set(schemas["Shipment"]["properties"]) == set(body)
    assert set(schemas["Container"]["properties"]) == set(body["containers"][0])
    assert set(schemas["Label"]["properties"]) == set(body["labels"][0])
    organization = client.get("/organization", headers=auth(token)).json
    assert set(schemas["Organization"]["properties"]) == set(organization)


def test_head_and_json_suffix(client):
    assert client.head("/openapi.json").status_code == 200
    assert client.get("/openapi.json.json").json == client.get("/openapi.json").json


def _rule_path(rule):
    """`/shipments/<shipment_id>` -> `/shipments/{shipment_id}`, written apart from api/apidoc.py on purpose."""
    return re.sub(r"<(?:[^:<>]+:)?([^<>]+)>", r"{\1}", rule.rule)


# Rules served but left out of the description, each for a stated reason (include_in_description=False).
UNDESCRIBED = {"docs_page.get_docs_asset"}  # the files of /docs: the page's, not the API's


def _described_rules(app):
    """Every rule but `static` and UNDESCRIBED; each must be a GET view with its documentation."""
    rules = [rule for rule in app.url_map.iter_rules() if rule.endpoint != "static"]
    assert all(rule.methods == {"GET", "HEAD"} for rule in rules)
    left_out = {rule.endpoint for rule in rules
                if not app.view_functions[rule.endpoint].apidoc.include_in_description}
    assert left_out == UNDESCRIBED
    return [rule for rule in rules if rule.endpoint not in UNDESCRIBED]


def test_every_get_rule_is_one_operation_and_every_operation_a_rule(app, client):
    document = client.get("/openapi.json").json
    rules = _described_rules(app)
    operations = sorted((path, method) for path, item in document["paths"].items() for method in item)
    assert operations == sorted((_rule_path(rule), "get") for rule in rules)
    for rule in rules:
        operation = document["paths"][_rule_path(rule)]["get"]
        assert operation["operationId"] == app.view_functions[rule.endpoint].__name__
        path_parameters = [p for p in operation.get("parameters", []) if p.get("in") == "path"]
        assert {p["name"] for p in path_parameters} == set(rule.arguments)
        for parameter in path_parameters:
            prefix = PREFIXES[parameter["name"].removesuffix("_id")]
            assert parameter["schema"]["pattern"] == id_pattern(prefix)


def test_public_operations_are_the_endpoints_without_a_token(app, client):
    document = client.get("/openapi.json").json
    public = {rule.endpoint for rule in _described_rules(app)
              if document["paths"][_rule_path(rule)]["get"]["security"] == []}
    # The page's files are public too: a browser loading /docs sends no token.
    assert public | UNDESCRIBED == guard.PUBLIC_ENDPOINTS


def test_a_view_without_documentation_fails_the_build(app):
    app.add_url_rule("/undocumented", "undocumented", lambda: "", methods=["GET"])
    with pytest.raises(UndocumentedView, match="/undocumented"):
        build_spec(app)


def test_an_undocumented_method_fails_the_build(app):
    # A POST rule on a documented view: the documentation speaks of GET only.
    app.add_url_rule("/shipments", "shipments.list_shipments", methods=["POST"])
    with pytest.raises(UndocumentedView, match="POST"):
        build_spec(app)


def test_flask_openapi_print(app, client):
    result = app.test_cli_runner().invoke(args=["openapi", "print"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == client.get("/openapi.json").json


# Candidate values for every query parameter: the description decides whether each is allowed,
# and the API must agree (allowed: not rejected; forbidden: 400 invalid_parameter naming the param).
CANDIDATES = [
    "", " ", "0", "1", "05", "25", "100", "101", "-1", "%2B5", "1e1", "0x10", "5.0", "abc", "null",
    "draft", "draft,arrived", "in_transit,draft,draft", "DRAFT", "error", "draft,", ",draft", "draft,%20arrived",
    "failed,warning", "pending,passed,failed,skipped,warning", "warning,unknown",
    "false", "true", "any", "TRUE", "1,2",
    "shp_1", "shp_999999999999999999", "shp_0", "shp_01", "shp_", "shp_1,shp_2", "alr_1", "chk_7", "lbl_1",
    "lbl_1,lbl_2", "lbl_1,", "lbl_0", "SHP_1",
    "2026-03-03", "2026-03-03T12:00:00Z", "2026-03-03T12:00Z", "2026-03-03T12:00:00", "2026-03-03T12:00:00.5Z",
    "2026-03-03T12:00:00.123456%2B16:00", "2026-03-03T12:00:00-23:59", "2026-03-03T12:00:00%2B0530",
    "2026-03-03T12:00:00%2B05", "2026-03-03T12:00:00.1234567Z", "2026-03-03T12:00:00%2B24:00",
    "2026-03-03T12:00:00%2B00:60", "2026-03-03t12:00:00z", "2026-3-3", "20260303", "2026-03-03%2012:00:00",
    "avocado", "x" * 500, "x" * 501, "a%00b",
    # Comma lists at 497 to 503 characters: the described maxLength is the one parse_query applies.
    ",".join(["draft"] * 83), ",".join(["draft"] * 84), ",".join(["failed"] * 71), ",".join(["failed"] * 72),
    ",".join(["lbl_1"] * 83), ",".join(["lbl_1"] * 84),
]


def described_query_parameters(document):
    """(path, parameter object) for every query parameter of every operation."""
    for path, item in document["paths"].items():
        for operation in item.values():
            for parameter in operation.get("parameters", []):
                if isinstance(parameter, dict) and parameter.get("in") == "query":
                    yield path, parameter


def description_allows(parameter, raw):
    """Whether the description allows the query value `raw` (percent-encoded) for `parameter`."""
    from urllib.parse import unquote
    from jsonschema import Draft202012Validator

    value = unquote(raw)
    if value == "":
        return bool(parameter.get("allowEmptyValue"))
    schema = parameter["schema"]
    if schema["type"] == "integer":
        # A query value is text: only decimal digits spell an integer.
        if not re.fullmatch(r"[0-9]+", value, re.ASCII):
            return False
        instance = int(value)
    else:
        instance = value
    return Draft202012Validator(schema).is_valid(instance)


def test_every_query_parameter_validates_as_described(app, conn, client):
    # About 1,200 requests: more than one token may make in the rate-limit window.
    client = with_limits(app, per_token=10_000, per_ip=10_000).test_client()
    token = make_token(conn, make_org(conn, "acme"))
    document = client.get("/openapi.json").json
    checked = set()
    mismatches = []
    for path, parameter in described_query_parameters(document):
        name = parameter["name"]
        verdicts = set()
        for raw in CANDIDATES:
            allowed = description_allows(parameter, raw)
            verdicts.add(allowed)
            response = client.get(f"{path}?{name}={raw}", headers=auth(token))
            rejected = response.status_code == 400
            if allowed and response.status_code != 200:
                mismatches.append((path, name, raw, "allowed but", response.status_code, response.json))
            elif not allowed and not (rejected and response.json["error"]["code"] == "invalid_parameter"
                                      and response.json["error"]["param"] == name):
                mismatches.append((path, name, raw, "forbidden but", response.status_code, response.json))
        # Every parameter meets at least one allowed and one forbidden candidate.
        assert verdicts == {True, False}, (path, name)
        checked.add((path, name))
    assert mismatches == []
    assert len(checked) == 28


def object_schemas(schema, where):
    """(where, schema) for `schema` and every object schema nested inline in it."""
    if not isinstance(schema, dict):
        return
    if "properties" in schema:
        yield where, schema
        for name, value in schema["properties"].items():
            yield from object_schemas(value, f"{where}.{name}")
    for key in ("items", "additionalProperties"):
        yield from object_schemas(schema.get(key), f"{where}[{key}]")
    for key in ("anyOf", "oneOf", "allOf"):
        for index, value in enumerate(schema.get(key, [])):
            yield from object_schemas(value, f"{where}.{key}[{index}]")


def test_every_field_of_every_response_schema_is_required(client):
    # The spec: every documented field is always present (null when it has no value, never omitted).
    schemas = client.get("/openapi.json").json["components"]["schemas"]
    found = dict(item for name, schema in schemas.items() for item in object_schemas(schema, name))
    assert {"Shipment", "Error", "ErrorDetail", "ShipmentList", "PackingListFields"} <= set(found)
    for where, schema in found.items():
        assert schema.get("required") == list(schema["properties"]), where
    # Nullable fields stay nullable: required means present, not non-null.
    assert schemas["Shipment"]["properties"]["eta"]["type"] == ["string", "null"]
    assert "erp_reference" in schemas["Shipment"]["required"]


def closed_lists(value, where):
    """(where, keyword) for every `enum` or `const` inside `value`."""
    if isinstance(value, dict):
        for key, inner in value.items():
            if key in ("enum", "const"):
                yield where, key
            yield from closed_lists(inner, f"{where}.{key}")
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            yield from closed_lists(inner, f"{where}[{index}]")


def test_response_value_lists_are_open(client):
    # The spec: clients do not fail on unknown enum values, so no response schema publishes a closed
    # list; the known values are in `x-known-values` and the description.
    schemas = client.get("/openapi.json").json["components"]["schemas"]
    assert list(closed_lists(schemas, "components.schemas")) == []
    status = schemas["Shipment"]["properties"]["status"]
    assert status["type"] == "string"
    assert status["x-known-values"] == ["draft", "validated", "in_transit", "arrived", "error", "in_warehouse"]
    assert "Known values: `draft`, `validated`" in status["description"]
    reason = schemas["Tracking"]["properties"]["unavailable_reason"]
    assert reason["type"] == ["string", "null"]
    assert reason["x-known-values"] == ["unsupported_carrier", "invalid_reference", "not_found", "provider_error",
                                        "past_voyage"]
    assert schemas["FreeTimeClock"]["properties"]["free_days_source"]["x-known-values"][0] == "shipment"
    assert "invalid_parameter" in schemas["ErrorDetail"]["properties"]["code"]["x-known-values"]
    assert schemas["Token"]["properties"]["scopes"]["items"]["x-known-values"] == ["read"]


def test_query_filters_the_api_validates_stay_closed(client):
    parameters = client.get("/openapi.json").json["paths"]["/shipments"]["get"]["parameters"]
    query = {p["name"]: p for p in parameters if isinstance(p, dict) and p.get("in") == "query"}
    # A closed list of words in one comma-separated value (a pattern, not an array: see api/params.py).
    assert query["status"]["schema"]["pattern"] == ("^(draft|validated|in_transit|arrived|in_warehouse)"
                                                    "(,(draft|validated|in_transit|arrived|in_warehouse))*$")
