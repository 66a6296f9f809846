"""Documents as the API shows them: current records of visible shipments, with their data and file."""
from models.db import execute_all, execute_one

# A Document's columns, in a shipment's list and alone: `downloadable` and `data_available` derive from
# stored facts.
DOCUMENT_COLUMNS = """d.id, d.shipment_id, d.type, d.filename, d.content_type, d.byte_size, d.source, d.parse_status,
       (d.storage_key IS NOT NULL AND d.scan_state = 'clean') AS downloadable,
       d.page_range,
       EXISTS (SELECT 1 FROM document_data dd
                WHERE dd.document_id = d.id AND dd.schema IS NOT NULL AND dd.fields <> '{}'::jsonb) AS data_available,
       d.created_at, d.updated_at"""

# list_shipment_documents: the visible shipment (one row even without documents) and its current
# documents, oldest first: by created_at as shown (to the second), then id; served by
# documents_shipment_created_idx.
LIST_SQL = f"""
SELECT s.id AS found_shipment_id, {DOCUMENT_COLUMNS}
  FROM shipments s
  LEFT JOIN documents d ON d.shipment_id = s.id AND d.record_kind = 'current'
 WHERE s.id = %(shipment_id)s AND visible_to(s, %(organization_id)s)
 ORDER BY date_trunc('second', d.created_at AT TIME ZONE 'UTC'), d.id
"""

# get_document: one current document of a visible shipment of the organization.
GET_SQL = f"""
SELECT {DOCUMENT_COLUMNS}
  FROM documents d
  JOIN shipments s ON s.id = d.shipment_id
 WHERE d.id = %(document_id)s AND d.organization_id = %(organization_id)s AND d.record_kind = 'current'
   AND visible_to(s, %(organization_id)s)
"""

# get_document_data: the extracted data of one current document.
DATA_SQL = """
SELECT d.id AS document_id, d.type,
       -- Nothing extracted, or no structured schema: schema null and fields {} (the spec).
       CASE WHEN dd.schema IS NOT NULL AND dd.fields <> '{}'::jsonb THEN dd.schema END AS schema,
       CASE WHEN dd.schema IS NOT NULL THEN dd.fields ELSE '{}'::jsonb END AS fields
  FROM documents d
  JOIN shipments s ON s.id = d.shipment_id
  LEFT JOIN document_data dd ON dd.document_id = d.id
 WHERE d.id = %(document_id)s AND d.organization_id = %(organization_id)s AND d.record_kind = 'current'
   AND visible_to(s, %(organization_id)s)
"""

# get_document_file: where the file of one current, downloadable document is stored.
FILE_SQL = """
SELECT d.id, d.filename, d.content_type, d.storage_key, d.byte_size, d.updated_at
  FROM documents d
  JOIN shipments s ON s.id = d.shipment_id
 WHERE d.id = %(document_id)s AND d.organization_id = %(organization_id)s AND d.record_kind = 'current'
   AND d.storage_key IS NOT NULL AND d.scan_state = 'clean'
   AND visible_to(s, %(organization_id)s)
"""


def list_shipment_documents(conn, organization_id, shipment_id):
    """Current documents of a visible shipment, oldest first; None when the shipment is not found."""
    rows = execute_all(conn, LIST_SQL, {"organization_id": organization_id, "shipment_id": shipment_id})
    if not rows:
        return None
    return [{k: v for k, v in row.items() if k != "found_shipment_id"} for row in rows if row["id"] is not None]


def _one(conn, statement, organization_id, document_id):
    return execute_one(conn, statement, {"organization_id": organization_id, "document_id": document_id})


def get_document(conn, organization_id, document_id):
    """One current document, or None."""
    return _one(conn, GET_SQL, organization_id, document_id)


def get_document_data(conn, organization_id, document_id):
    """The extracted data of one current document ({document_id, type, schema, extracted}), or None."""
    row = _one(conn, DATA_SQL, organization_id, document_id)
    if row is not None:
        # DocumentDataSchema shapes the fields by their schema, so it takes them as a pair.
        row["extracted"] = (row["schema"], row.pop("fields"))
    return row


def get_document_file(conn, organization_id, document_id):
    """Filename, content type, storage key and validator columns of a downloadable current document, or None."""
    return _one(conn, FILE_SQL, organization_id, document_id)
