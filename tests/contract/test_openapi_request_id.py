"""X-Request-Id in /openapi.json: on every response, a parameter of every operation, the bounds of api/observe.py."""
import pytest
from jsonschema import Draft202012Validator

from api import observe
from tests.support.apps import make_app
from tests.support.factories import auth, make_org, make_shipment, make_token
from tests.support.processes import free_port

HEADER_REF = {"$ref": "#/components/headers/RequestId"}
PARAMETER_REF = {"$ref": "#/components/parameters/RequestId"}
# Safe and unsafe ids (api/observe.py keeps 1 to 200 of A-Z a-z 0-9 . _ -).
KEPT = ["abc-123", "A.b_c-9", "0", "x" * 200, "3f2c9a4e-1b7d-4c55-9a0e-2d6f8b1c7e90"]
REPLACED = ["", "x" * 201, "a b", "a\u00e9", "a;b", "a/b", "a:b", "a,b", "a\tb", "\u0661"]


@pytest.fixture(scope="module")
def description():
    """/openapi.json as served (it is built without a database)."""
    return make_app("postgresql://unused/").test_client().get("/openapi.json").json


def header_validator(description):
    """A validator for the value of the RequestId response header."""
    return Draft202012Validator(description["components"]["headers"]["RequestId"]["schema"])


def test_every_response_of_every_operation_names_the_header(description):
    statuses = set()
    for path, item in description["paths"].items():
        for method, operation in item.items():
            assert PARAMETER_REF in operation["parameters"], (path, method)
            for status, response in operation["responses"].items():
                assert response["headers"]["X-Request-Id"] == HEADER_REF, (path, method, status)
                statuses.add(status)
    assert statuses == {"200", "304", "400", "401", "404", "429", "503"}
    # The probes are answered outside the described API (api/probes.py) and are not in the description.
    assert not {"/healthz", "/readyz", "/metrics"} & set(description["paths"])


def test_the_components(description):
    header = description["components"]["headers"]["RequestId"]
    assert header["schema"] == {"type": "string", "minLength": 1, "maxLength": 200,
                                "pattern": "^[A-Za-z0-9._-]{1,200}$"}
    assert "1 to 200 characters of `A-Z a-z 0-9 . _ -`" in header["description"]
    assert "32 random lowercase hex digits" in header["description"]
    assert "support request" in header["description"]
    parameter = description["components"]["parameters"]["RequestId"]
    assert (parameter["name"], parameter["in"], parameter["required"]) == ("X-Request-Id", "header", False)
    assert parameter["schema"]["type"] == "string"
    kept, replaced = parameter["schema"]["anyOf"]
    assert {key: value for key, value in kept.items() if key != "title"} == header["schema"]
    assert replaced == {"title": "replaced", "type": "string",
                        "description": "Any other value: replaced by an id the service makes."}
    assert "not refused but replaced" in parameter["description"]


@pytest.mark.parametrize("given", KEPT + REPLACED)
def test_the_described_bounds_are_the_codes(description, given):
    kept_schema = description["components"]["parameters"]["RequestId"]["schema"]["anyOf"][0]
    assert Draft202012Validator(kept_schema).is_valid(given) == (given in KEPT)
    assert (observe.request_id(given) == given) == (given in KEPT)
    # Every value is a valid request (never refused), and what comes back is within the header's schema.
    assert Draft202012Validator(description["components"]["parameters"]["RequestId"]["schema"]).is_valid(given)
    assert header_validator(description).is_valid(observe.request_id(given))


def test_real_responses_carry_a_described_id(description, database_url, conn):
    client = make_app(database_url, RATE_LIMITS={"window_seconds": 300, "per_token": 5, "per_ip": 100,
                                                 "anonymous_per_ip": 1}).test_client()
    token = make_token(conn, make_org(conn))
    shipment = make_shipment(conn, 1)
    first = client.get(f"/shipments/shp_{shipment}", headers=auth(token))
    unchanged = auth(token, **{"If-None-Match": first.headers["ETag"]})
    answers = [("/shipments/{shipment_id}", first),
               ("/shipments/{shipment_id}", client.get(f"/shipments/shp_{shipment}", headers=unchanged)),
               ("/shipments", client.get("/shipments?limit=0", headers=auth(token))),
               ("/shipments/{shipment_id}", client.get("/shipments/shp_999", headers=auth(token))),
               ("/organization", client.get("/organization")),
               ("/organization", client.get("/organization"))]
    down = make_app(f"postgresql://127.0.0.1:{free_port()}/none?connect_timeout=2").test_client()
    answers.append(("/organization", down.get("/organization")))
    assert [response.status_code for _path, response in answers] == [200, 304, 400, 404, 401, 429, 503]
    ids = set()
    for path, response in answers:
        documented = description["paths"][path]["get"]["responses"][str(response.status_code)]
        assert documented["headers"]["X-Request-Id"] == HEADER_REF, (path, response.status_code)
        assert header_validator(description).is_valid(response.headers["X-Request-Id"]), response.headers
        ids.add(response.headers["X-Request-Id"])
    assert len(ids) == len(answers)


@pytest.mark.parametrize("given", REPLACED)
def test_an_unsafe_id_is_replaced_not_refused(description, client, conn, given):
    token = make_token(conn, make_org(conn))
    response = client.get("/organization", headers=auth(token, **{"X-Request-Id": given}))
    assert response.status_code == 200
    returned = response.headers["X-Request-Id"]
    assert returned != given and header_validator(description).is_valid(returned)
    assert len(returned) == 32 and set(returned) <= set("0123456789abcdef")


@pytest.mark.parametrize("given", KEPT)
def test_a_safe_id_is_echoed(client, conn, given):
    token = make_token(conn, make_org(conn))
    response = client.get("/organization", headers=auth(token, **{"X-Request-Id": given}))
    assert (response.status_code, response.headers["X-Request-Id"]) == (200, given)


def test_the_header_name_in_any_case_and_a_repeated_header(client, conn):
    token = make_token(conn, make_org(conn))
    response = client.get("/organization", headers=auth(token, **{"x-request-id": "lower-case"}))
    assert (response.status_code, response.headers["X-Request-Id"]) == (200, "lower-case")
    twice = [*auth(token).items(), ("X-Request-Id", "first"), ("X-Request-Id", "second")]
    response = client.get("/organization", headers=twice)
    assert response.status_code == 200
    assert response.headers["X-Request-Id"] not in ("first", "second", "first,second", "first, second")
    assert len(response.headers["X-Request-Id"]) == 32
