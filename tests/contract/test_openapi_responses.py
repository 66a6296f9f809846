"""Every response the API gives on the demo data validates against the schemas of /openapi.json."""
import jsonschema
import pytest

from models import db

PAGES = ["/organization", "/shipments?limit=100", "/shipments?limit=100&archived=true",
         "/alerts?limit=100", "/checks?limit=100&status=pending,passed,failed,skipped,warning",
         "/free_time/at_risk", "/events?limit=100"]
PER_SHIPMENT = ["/shipments/{shipment_id}", "/shipments/{shipment_id}/timeline", "/shipments/{shipment_id}/free_time",
                "/shipments/{shipment_id}/documents", "/shipments/{shipment_id}/packing_lists"]


@pytest.fixture(scope="module")
def demo(demo_database):
    """The session's demo data: a connection, a client and a token of acme's owner."""
    conn = db.connect(demo_database.url)
    conn.autocommit = True
    yield conn, demo_database.app.test_client(), demo_database.headers
    conn.close()


def _validator(document, path):
    """A JSON Schema validator for the 200 response of `path` in the OpenAPI document."""
    schema = document["paths"][path]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    resolver_doc = {**schema, "components": document["components"]}
    return jsonschema.Draft202012Validator(resolver_doc)


def _check(client, headers, document, path, template):
    response = client.get(path, headers=headers)
    assert response.status_code == 200, (path, response.json)
    errors = sorted(_validator(document, template).iter_errors(response.json), key=str)
    assert not errors, (path, [f"{list(e.absolute_path)}: {e.message}" for e in errors[:5]])
    return response.json


@pytest.mark.parametrize("path", PAGES)
def test_lists_and_organization_match_the_description(demo, path):
    _conn, client, headers = demo
    document = client.get("/openapi.json").json
    body = _check(client, headers, document, path, path.split("?")[0])
    assert body.get("data", [body]) != []


def test_every_shipment_and_its_resources_match_the_description(demo):
    conn, client, headers = demo
    document = client.get("/openapi.json").json
    with conn.cursor() as cur:
        cur.execute("SELECT id FROM shipments WHERE NOT awaiting_approval AND NOT owned_elsewhere "
                    "AND organization_id = (SELECT id FROM organizations WHERE slug = 'acme') ORDER BY id")
        ids = [row["id"] for row in cur.fetchall()]
    assert len(ids) >= 250
    for shipment_id in ids:
        for path in PER_SHIPMENT:
            _check(client, headers, document, path.replace("{shipment_id}", f"shp_{shipment_id}"), path)
