"""GET /shipments/{shipment_id}/documents and /documents/{document_id} with its /data and /file."""
import os
import re
import stat
import unicodedata
from urllib.parse import quote

from flask import Blueprint, current_app, send_file

from api.apidoc import get_route
from api.conditional import row_etag
from api.context import get_conn, principal
from api.responses import listing, missing, path_id, resource
from api.schemas.common import list_schema
from models import documents
from rendering.schemas.documents import DocumentDataSchema, DocumentSchema, PackingListFieldsSchema

bp = Blueprint("documents", __name__)

# type/subtype with optional parameters; anything else is served as opaque bytes.
_MEDIA_TYPE = re.compile(r"[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*"
                         r"(\s*;\s*[A-Za-z0-9!#$&^_.+-]+=(\"[^\"\\\x00-\x1f\x7f]*\"|[A-Za-z0-9!#$&^_.+-]+))*",
                         re.ASCII)
# The media types a file is served with (docs/documents.md): what the application stores for the documents
# of a shipment (PDFs, scans and photos, spreadsheets, CSV exports). A stored type outside this list, or
# one that is not well formed, is served as application/octet-stream, so the description names every
# type a client can receive. application/octet-stream comes first: generators pick the first type they
# can read, and for text/csv they would decode the bytes as text.
FILE_MEDIA_TYPES = ("application/octet-stream", "application/pdf", "image/jpeg", "image/png", "image/tiff",
                    "text/csv", "application/vnd.ms-excel",
                    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet")
# RFC 5987 attr-char: what may stay unescaped in filename*.
_ATTR_CHARS = "!#$&+-.^_`|~"
# Headers of a file download besides Service-Version.
FILE_HEADERS = {
    "Content-Disposition": {"description": "`attachment` with `filename` (ASCII fallback) and "
                                           "`filename*` (RFC 6266, UTF-8).", "schema": {"type": "string"}},
    "Content-Length": {"description": "Size of the file in bytes.", "schema": {"type": "integer"}},
}


@get_route(bp, "/shipments/<shipment_id>/documents", list_schema(DocumentSchema, "DocumentList"))
def list_shipment_documents(shipment_id):
    """Current documents of a shipment, oldest first, not paged.

    Only current documents are listed: replaced versions, reference-only attachments and page-split
    records are left out. Ordered by `created_at` (to the second), then id; `has_more` is always false.
    """
    items = documents.list_shipment_documents(get_conn(), principal()["organization_id"],
                                              path_id(shipment_id, "shp", "shipment"))
    if items is None:
        raise missing("shipment", shipment_id)
    return listing("document", DocumentSchema, items)


@get_route(bp, "/documents/<document_id>", DocumentSchema)
def get_document(document_id):
    """One current document.

    A replaced, reference-only or page-split document is a 404, like a missing one. `downloadable`
    says whether `/documents/{document_id}/file` serves its file; `data_available` whether
    `/documents/{document_id}/data` has extracted fields.
    """
    document = documents.get_document(get_conn(), principal()["organization_id"],
                                      path_id(document_id, "doc", "document"))
    if document is None:
        raise missing("document", document_id)
    return resource("document", DocumentSchema, document)


# PackingListFields is named by $ref in DocumentDataSchema.fields, so the description must define it.
@get_route(bp, "/documents/<document_id>/data", DocumentDataSchema, components=(PackingListFieldsSchema,))
def get_document_data(document_id):
    """Data extracted from a current document.

    `schema` names the shape of `fields`; for `packing_list` every key is present (null, or `[]` for
    lists, when not found). When nothing was extracted or the type has no structured schema, `schema`
    is null and `fields` is `{}`, still with status 200.
    """
    document = documents.get_document_data(get_conn(), principal()["organization_id"],
                                              path_id(document_id, "doc", "document"))
    if document is None:
        raise missing("document", document_id)
    return resource("document_data", DocumentDataSchema, document)


# `format: binary` rather than 3.1's contentMediaType: openapi-python-client reads it as a file (bytes).
@get_route(bp, "/documents/<document_id>/file", {"type": "string", "format": "binary"},
           media_types=FILE_MEDIA_TYPES, response_description="The file's bytes, with the document's own media type.",
           headers=FILE_HEADERS, errors={
               "400": "Service-Version is invalid (`invalid_parameter`) or unpublished (`invalid_version`).",
               "404": "No such current document, or it has no file that passed the security scan "
                      "(`resource_missing`)."})
def download_document_file(document_id):
    """The original file of a downloadable document, as an attachment.

    Served with the document's `content_type` when it is one of the media types listed here, else as
    `application/octet-stream`; the file name is in `Content-Disposition`. Only a document whose
    `downloadable` is true has a file: one still being scanned, blocked or without a file is a 404.
    """
    document = documents.get_document_file(get_conn(), principal()["organization_id"],
                                           path_id(document_id, "doc", "document file"))
    stored = document and open_stored_file(current_app.config["STORAGE_DIR"], document["storage_key"])
    if not stored:
        raise missing("document file", document_id)
    file, size = stored
    media_type = served_media_type(document["content_type"])
    # The open file is wrapped, not read: the WSGI server streams it in chunks (wsgi.file_wrapper
    # when it has one). No Range handling; If-None-Match is answered by api/conditional.py.
    response = send_file(file, mimetype="application/octet-stream", as_attachment=True, download_name="file",
                         conditional=False, etag=False, last_modified=None, max_age=None)
    # From the row, so the file is never read to hash it: the writer sets a new updated_at (and usually a
    # new storage key) when the file changes; the name and type are in the headers a 200 sends.
    response.set_etag(row_etag(document["id"], document["updated_at"].isoformat(), document["byte_size"],
                               document["storage_key"], document["content_type"], document["filename"]))
    response.content_length = size
    # Set after send_file, which would add a charset of its own to text types.
    response.headers["Content-Type"] = media_type
    response.headers["Content-Disposition"] = content_disposition(document["filename"])
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Cache-Control"] = "private, no-store"
    return response


def served_media_type(content_type):
    """The document's content type (parameters kept) when well formed and listed, else application/octet-stream."""
    if _MEDIA_TYPE.fullmatch(content_type) and content_type.split(";")[0].strip().lower() in FILE_MEDIA_TYPES:
        return content_type
    return "application/octet-stream"


def storage_path(storage_dir, key):
    """The absolute path of a storage key inside `storage_dir`, or None when the key would escape it."""
    if not key or "\x00" in key or os.path.isabs(key) or "\\" in key:
        return None
    root = os.path.realpath(storage_dir)
    path = os.path.realpath(os.path.join(root, key))
    # realpath resolves `..` and symbolic links, so a key cannot reach outside the folder by either.
    if os.path.commonpath([root, path]) != root or path == root:
        return None
    return path


def open_stored_file(storage_dir, key):
    """(open binary file, size) for a storage key naming a regular file in the folder, else None."""
    path = storage_path(storage_dir, key)
    if path is None:
        return None
    try:
        file = open(path, "rb")
    except OSError:
        # Missing on disk (or removed since the row was read): the document has no file to give.
        return None
    info = os.fstat(file.fileno())
    if not stat.S_ISREG(info.st_mode):
        file.close()
        return None
    return file, info.st_size


def content_disposition(filename):
    """`attachment` with an ASCII `filename` fallback and the exact name in RFC 6266 `filename*`."""
    # Path separators and control characters never reach the client's file system.
    name = "".join(ch for ch in filename if unicodedata.category(ch) not in ("Cc", "Cf", "Zl", "Zp"))
    name = re.sub(r"[/\\]", "_", name).strip().lstrip(".") or "download"
    fallback = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode("ascii")
    fallback = re.sub(r'["\\%]', "_", fallback).strip() or "download"
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{quote(name, safe=_ATTR_CHARS)}"

