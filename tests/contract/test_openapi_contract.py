"""/openapi.json for readers and generators: servers, license, tags, summaries, descriptions, webhook signatures."""
import pytest

from api.apidoc import docstring_parts
from api.documents import FILE_MEDIA_TYPES
from api.openapi import TAGS, UndocumentedView, build_spec
from models import db


def _operations(document):
    """(where, operation) of every path operation and every webhook operation."""
    for section in ("paths", "webhooks"):
        for name, item in document[section].items():
            for method, operation in item.items():
                yield f"{section} {name} {method}", operation


def test_servers_license_and_tags(app):
    document = build_spec(app)
    assert document["servers"] == [{"url": "/", "description": "The origin serving this description."}]
    assert document["info"]["license"] == {"name": "Proprietary"}
    tags = [tag["name"] for tag in document["tags"]]
    assert len(tags) == len(set(tags)) and all(tag["description"] for tag in document["tags"])
    assert {name for name, _text in TAGS.values()} | {"Webhooks"} == set(tags)


def test_every_operation_is_tagged_summarised_and_described(app):
    declared = {tag["name"] for tag in build_spec(app)["tags"]}
    for where, operation in _operations(build_spec(app)):
        assert len(operation["tags"]) == 1 and operation["tags"][0] in declared, where
        assert operation["summary"] and operation["description"], where
        # The description says more than the summary: a docstring with a body, or given outright.
        assert operation["description"] != operation["summary"], where


def test_description_is_the_docstring_body(app):
    operation = build_spec(app)["paths"]["/shipments/{shipment_id}/timeline"]["get"]
    assert operation["tags"] == ["Timeline"]
    assert operation["summary"] == "Legs, tracking events and ETA revisions of a shipment."
    assert operation["description"].startswith("Legs are in travel order. Tracking events are oldest first;")
    assert "\n" in operation["description"]


def test_docstring_parts():
    def view():
        """First line
        continued.

        Body, first paragraph.

        Second paragraph.
        """
    assert docstring_parts(view) == ("First line continued.", "Body, first paragraph.\n\nSecond paragraph.")
    view.__doc__ = "Only a summary."
    assert docstring_parts(view) == ("Only a summary.", "")


def test_a_blueprint_without_a_tag_fails_the_build(app):
    app.add_url_rule("/untagged", "untagged.view", app.view_functions["shipments.list_shipments"], methods=["GET"])
    with pytest.raises(UndocumentedView, match="'untagged' has no tag"):
        build_spec(app)


def test_webhooks_name_their_signature_scheme(app):
    document = build_spec(app)
    scheme = document["components"]["securitySchemes"]["webhookSignature"]
    assert (scheme["type"], scheme["in"], scheme["name"]) == ("apiKey", "header", "webhook-signature")
    assert "HMAC-SHA256" in scheme["description"] and "<webhook-id>.<webhook-timestamp>" in scheme["description"]
    for event_type, item in document["webhooks"].items():
        post = item["post"]
        assert post["security"] == [{"webhookSignature": []}], event_type
        assert post["tags"] == ["Webhooks"]
        assert [p["name"] for p in post["parameters"]] == ["webhook-id", "webhook-timestamp", "webhook-signature",
                                                           "User-Agent"]


def test_token_operations_ask_for_the_bearer_scheme_without_scopes(app):
    document = build_spec(app)
    assert document["paths"]["/shipments"]["get"]["security"] == [{"bearer": []}]
    assert "`read`" in document["components"]["securitySchemes"]["bearer"]["description"]


def test_demo_downloads_are_of_described_types(demo_database):
    """One download per media type the demo's downloadable documents have: each is a described type."""
    client = demo_database.app.test_client()
    content = build_spec(demo_database.app)["paths"]["/documents/{document_id}/file"]["get"]["responses"]["200"][
        "content"]
    assert list(content) == list(FILE_MEDIA_TYPES)
    conn = db.connect(demo_database.url)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT DISTINCT ON (d.content_type) d.id, d.content_type FROM documents d "
                        "JOIN shipments s ON s.id = d.shipment_id JOIN organizations o ON o.id = d.organization_id "
                        "WHERE o.slug = 'acme' AND d.record_kind = 'current' AND d.storage_key IS NOT NULL "
                        "AND d.scan_state = 'clean' AND NOT s.awaiting_approval AND NOT s.owned_elsewhere "
                        "ORDER BY d.content_type, d.id")
            rows = cur.fetchall()
    finally:
        conn.close()
    assert {"application/pdf", "text/csv"} <= {row["content_type"] for row in rows}
    for row in rows:
        response = client.get(f"/documents/doc_{row['id']}/file", headers=demo_database.headers)
        response.close()
        assert response.status_code == 200, row
        assert response.headers["Content-Type"].split(";")[0] in content, row
