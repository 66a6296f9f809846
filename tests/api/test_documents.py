"""GET /shipments/{id}/documents, /documents/{id} and /documents/{id}/data."""
import json

import pytest

from tests.support.apps import with_limits
from tests.support.counting import statement_counts
from tests.support.factories import auth, insert, make_org, make_shipment, make_token

CREATED = "2026-03-04T05:06:07Z"


@pytest.fixture
def org(conn):
    org_id = make_org(conn, "acme")
    return {"id": org_id, "token": make_token(conn, org_id), "shipment": make_shipment(conn, org_id)}


def make_document(conn, org_id, shipment_id, **values):
    values = {"organization_id": org_id, "shipment_id": shipment_id, "type": "packing_list",
              "filename": "PL 4711.pdf", "content_type": "application/pdf", "byte_size": 1234,
              "source": "email_upload", "parse_status": "parsed", "created_at": CREATED, "updated_at": CREATED,
              **values}
    return insert(conn, "documents", **values)


def add_data(conn, document_id, schema, fields):
    with conn.cursor() as cur:
        cur.execute("INSERT INTO document_data (document_id, schema, fields) VALUES (%s, %s, %s)",
                    (document_id, schema, json.dumps(fields)))


def document_body(document_id, shipment_id, downloadable=False, data_available=False, **changes):
    return {"object": "document", "id": f"doc_{document_id}", "shipment_id": f"shp_{shipment_id}",
            "type": "packing_list", "filename": "PL 4711.pdf", "content_type": "application/pdf",
            "byte_size": 1234, "source": "email_upload", "parse_status": "parsed", "downloadable": downloadable,
            "page_range": None, "data_available": data_available, "created_at": CREATED, "updated_at": CREATED,
            **changes}


def test_lists_current_documents_oldest_first(conn, client, org):
    shipment = org["shipment"]
    first = make_document(conn, org["id"], shipment, storage_key="a/1.pdf", scan_state="clean")
    make_document(conn, org["id"], shipment, record_kind="replaced", replaced_by_id=first)
    make_document(conn, org["id"], shipment, record_kind="reference_only")
    make_document(conn, org["id"], shipment, record_kind="page_split", page_range="1-2")
    scanning = make_document(conn, org["id"], shipment, storage_key="a/2.pdf", scan_state="scanning")
    blocked = make_document(conn, org["id"], shipment, storage_key="a/3.pdf", scan_state="blocked",
                            page_range="3-4", type="invoice")
    add_data(conn, first, "packing_list", {"packing_list_number": "PL-1"})
    add_data(conn, scanning, "packing_list", {})
    add_data(conn, blocked, None, {"invoice_number": "X"})

    response = client.get(f"/shipments/shp_{shipment}/documents", headers=auth(org["token"]))

    assert response.status_code == 200
    assert response.headers["Service-Version"] == "2026-10-01"
    assert response.json == {"object": "list", "has_more": False, "data": [
        document_body(first, shipment, downloadable=True, data_available=True),
        document_body(scanning, shipment),
        document_body(blocked, shipment, page_range="3-4", type="invoice"),
    ]}


def test_oldest_first_follows_the_shown_created_at_then_id(conn, client, org):
    shipment = org["shipment"]
    # Ids disagree with creation times; within one shown second, microseconds do not count.
    late = make_document(conn, org["id"], shipment, created_at="2026-03-05T00:00:00Z")
    early = make_document(conn, org["id"], shipment, created_at="2026-03-01T00:00:00Z")
    same_second_b = make_document(conn, org["id"], shipment, created_at="2026-03-03T10:00:00.900Z")
    same_second_a = make_document(conn, org["id"], shipment, created_at="2026-03-03T10:00:00.100Z")
    body = client.get(f"/shipments/shp_{shipment}/documents", headers=auth(org["token"])).json
    assert [item["id"] for item in body["data"]] == [
        f"doc_{early}", f"doc_{same_second_b}", f"doc_{same_second_a}", f"doc_{late}"]
    shown = [(item["created_at"], int(item["id"].removeprefix("doc_"))) for item in body["data"]]
    assert shown == sorted(shown)


def test_empty_list_and_json_suffix(client, org):
    response = client.get(f"/shipments/shp_{org['shipment']}/documents.json", headers=auth(org["token"]))
    assert (response.status_code, response.json) == (200, {"object": "list", "data": [], "has_more": False})


def test_get_document(conn, client, org):
    document = make_document(conn, org["id"], org["shipment"])
    response = client.get(f"/documents/doc_{document}", headers=auth(org["token"]))
    assert response.status_code == 200
    assert response.headers["Service-Version"] == "2026-10-01"
    assert response.json == document_body(document, org["shipment"])


def missing_cases(conn, org):
    """Path ids that must all be 404 resource_missing, for documents and shipments."""
    other = make_org(conn, "other")
    foreign_shipment = make_shipment(conn, other)
    hidden = make_shipment(conn, org["id"], awaiting_approval=True)
    elsewhere = make_shipment(conn, org["id"], owned_elsewhere=True)
    documents = {
        "replaced": make_document(conn, org["id"], org["shipment"], record_kind="replaced"),
        "reference_only": make_document(conn, org["id"], org["shipment"], record_kind="reference_only"),
        "page_split": make_document(conn, org["id"], org["shipment"], record_kind="page_split"),
        "foreign": make_document(conn, other, foreign_shipment),
        "hidden": make_document(conn, org["id"], hidden),
        "elsewhere": make_document(conn, org["id"], elsewhere),
    }
    document_ids = [f"doc_{n}" for n in documents.values()] + [
        "doc_999999", "doc_0", "doc_01", "shp_1", "doc_x", "doc_1234567890123456789", "DOC_1"]
    shipment_ids = [f"shp_{n}" for n in (foreign_shipment, hidden, elsewhere, 999999)] + [
        "shp_0", "shp_01", "doc_1", "shp_", "42"]
    return document_ids, shipment_ids


def test_missing_ids_are_404(conn, client, org):
    document_ids, shipment_ids = missing_cases(conn, org)
    paths = ([f"/documents/{d}" for d in document_ids] + [f"/documents/{d}/data" for d in document_ids]
             + [f"/shipments/{s}/documents" for s in shipment_ids])
    for path in paths:
        response = client.get(path, headers=auth(org["token"]))
        assert response.status_code == 404, path
        assert response.headers["Service-Version"] == "2026-10-01"
        error = response.json["error"]
        assert (error["type"], error["code"], error["param"]) == ("not_found_error", "resource_missing", None)


PACKING_LIST_FIELDS = {
    "packing_list_number": "PL-1", "exporter_name": "Finca Sol", "exporter_port": "Callao",
    "exporter_country": "Peru", "importer_name": "Fresh BV", "importer_country": "Netherlands",
    "total_net_weight": 19800.5, "total_boxes": 4950, "diagram_pallet_numbers": ["P1", "P2"],
    "container_number": "MSCU1234567",
    "line_items": [{"pallet_number": "P1", "produce_name": "Avocado", "variety": "Hass", "size_calibre": "18",
                    "quality_category": "I", "format": "4kg", "label": "Sol", "produce_type": "fruit",
                    "ggn": "4052852000000", "number_of_boxes": 220, "net_weight_kg": 880.0,
                    "box_weight_kg": 4.0, "gross_weight_kg": 950.5}],
}


@pytest.mark.parametrize("schema, stored, expected_schema, expected_fields", [
    ("packing_list", PACKING_LIST_FIELDS, "packing_list", PACKING_LIST_FIELDS),
    # Documented keys always present (null or []), unknown keys dropped, numbers typed.
    ("packing_list", {"packing_list_number": 17, "total_boxes": "12", "total_net_weight": "n/a", "extra": 1,
                      "line_items": [{"produce_name": "Kiwi", "number_of_boxes": 3.0}, "junk"]},
     "packing_list", {"packing_list_number": "17", "exporter_name": None, "exporter_port": None,
                      "exporter_country": None, "importer_name": None, "importer_country": None,
                      "total_net_weight": None, "total_boxes": 12, "diagram_pallet_numbers": [],
                      "container_number": None,
                      "line_items": [{"pallet_number": None, "produce_name": "Kiwi", "variety": None,
                                      "size_calibre": None, "quality_category": None, "format": None,
                                      "label": None, "produce_type": None, "ggn": None, "number_of_boxes": 3,
                                      "net_weight_kg": None, "box_weight_kg": None, "gross_weight_kg": None}]}),
    ("bill_of_lading", {"bl_number": "MAEU1", "nested": {"a": [1]}}, "bill_of_lading",
     {"bl_number": "MAEU1", "nested": {"a": [1]}}),
    ("packing_list", {}, None, {}),
    (None, {"free_text": "x"}, None, {}),
    (None, {}, None, {}),
])
def test_document_data(conn, client, org, schema, stored, expected_schema, expected_fields):
    document = make_document(conn, org["id"], org["shipment"])
    add_data(conn, document, schema, stored)
    response = client.get(f"/documents/doc_{document}/data", headers=auth(org["token"]))
    assert response.status_code == 200
    assert response.headers["Service-Version"] == "2026-10-01"
    assert response.json == {"object": "document_data", "document_id": f"doc_{document}", "type": "packing_list",
                             "schema": expected_schema, "fields": expected_fields}
    listed = client.get(f"/documents/doc_{document}", headers=auth(org["token"])).json
    assert listed["data_available"] is (expected_fields != {})


def test_document_data_without_row(conn, client, org):
    document = make_document(conn, org["id"], org["shipment"], type="certificate")
    response = client.get(f"/documents/doc_{document}/data.json", headers=auth(org["token"]))
    assert (response.status_code, response.json) == (200, {
        "object": "document_data", "document_id": f"doc_{document}", "type": "certificate",
        "schema": None, "fields": {}})


@pytest.mark.parametrize("path", ["/shipments/shp_1/documents", "/documents/doc_1", "/documents/doc_1/data"])
def test_common_rules(app, conn, client, org, path):
    make_document(conn, org["id"], org["shipment"])
    missing = client.get(path)
    assert (missing.status_code, missing.json["error"]["code"]) == (401, "missing_token")
    assert "Service-Version" not in missing.headers
    version = client.get(path, headers=auth(org["token"], **{"Service-Version": "2026-13-01"}))
    assert (version.status_code, version.json["error"]["code"]) == (400, "invalid_version")
    assert client.get(path + ".pdf", headers=auth(org["token"])).status_code == 404
    assert client.get(path + "?unknown=1", headers=auth(org["token"])).status_code == 200
    client = with_limits(app, per_token=0).test_client()
    assert client.get(path, headers=auth(org["token"])).status_code == 429


def test_statement_count_does_not_grow(app, conn, client, org):
    client.get("/organization", headers=auth(org["token"]))  # pins the version: one statement, once
    make_document(conn, org["id"], org["shipment"])
    statement_counts(app).clear()
    path = f"/shipments/shp_{org['shipment']}/documents"
    assert len(client.get(path, headers=auth(org["token"])).json["data"]) == 1
    for n in range(30):
        document = make_document(conn, org["id"], org["shipment"], storage_key=f"k{n}", scan_state="clean")
        add_data(conn, document, "packing_list", {"packing_list_number": str(n)})
    assert len(client.get(path, headers=auth(org["token"])).json["data"]) == 31
    one, many = statement_counts(app)
    assert one == many


READ_OPERATIONS = [
    ("list_alerts", "/alerts", "MonitoringAlertList"),
    ("list_checks", "/checks", "ShipmentCheckList"),
    ("get_shipment_timeline", "/shipments/{shipment_id}/timeline", "Timeline"),
    ("list_shipment_documents", "/shipments/{shipment_id}/documents", "DocumentList"),
    ("list_shipment_packing_lists", "/shipments/{shipment_id}/packing_lists", "PackingListList"),
    ("get_document", "/documents/{document_id}", "Document"),
    ("get_document_data", "/documents/{document_id}/data", "DocumentData"),
]


def test_openapi_describes_the_read_endpoints(client):
    from openapi_spec_validator import validate

    from api.documents import FILE_MEDIA_TYPES

    document = client.get("/openapi.json").json
    validate(document)
    for operation_id, path, component in READ_OPERATIONS:
        operation = document["paths"][path]["get"]
        assert operation["operationId"] == operation_id
        assert operation["responses"]["200"]["content"]["application/json"]["schema"] == {
            "$ref": f"#/components/schemas/{component}"}
        assert set(operation["responses"]) == {"200", "304", "400", "401", "404", "429", "503"}
    download = document["paths"]["/documents/{document_id}/file"]["get"]
    assert download["operationId"] == "download_document_file"
    assert list(download["responses"]["200"]["content"]) == list(FILE_MEDIA_TYPES)
    assert set(download["responses"]["200"]["headers"]) == {"Service-Version", "ETag", "RateLimit-Policy",
                                                            "RateLimit", "Content-Disposition", "Content-Length",
                                                            "X-Request-Id"}
    parameters = {p["name"]: p for p in document["paths"]["/alerts"]["get"]["parameters"] if "name" in p}
    assert set(parameters) == {"shipment", "limit", "starting_after"}
    parameters = {p["name"]: p for p in document["paths"]["/checks"]["get"]["parameters"] if "name" in p}
    assert set(parameters) == {"status", "shipment", "limit", "starting_after"}


def test_openapi_properties_are_the_serialised_fields(client):
    """Every described object lists exactly the keys its schema dumps (they are one definition)."""
    from rendering.schemas import alerts, checks, documents, packing_lists, timeline

    components = client.get("/openapi.json").json["components"]["schemas"]
    for schema in (alerts.MonitoringAlertSchema, checks.ShipmentCheckSchema, documents.DocumentSchema,
                   documents.DocumentDataSchema, documents.PackingListFieldsSchema,
                   documents.PackingListLineItemSchema, packing_lists.PackingListSchema,
                   packing_lists.PalletSchema, packing_lists.PackingLineSchema, timeline.TimelineSchema,
                   timeline.ShipmentLegSchema, timeline.TrackingEventSchema, timeline.EtaRevisionSchema):
        name = schema.__name__.removesuffix("Schema")
        dumped = {field.data_key or key for key, field in schema().fields.items()}
        assert set(components[name]["properties"]) == dumped, name
