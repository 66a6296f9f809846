"""GET /documents/{id}/file: streamed attachments, safe names, safe storage keys."""
import os

import pytest

from api.documents import FILE_MEDIA_TYPES, content_disposition, storage_path
from tests.support.apps import with_limits
from tests.support.counting import statement_counts
from tests.support.factories import auth, insert, make_org, make_shipment, make_token


@pytest.fixture
def org(conn, app):
    org_id = make_org(conn, "acme")
    os.makedirs(app.config["STORAGE_DIR"])
    return {"id": org_id, "token": make_token(conn, org_id), "shipment": make_shipment(conn, org_id),
            "storage": app.config["STORAGE_DIR"]}


def make_document(conn, org, key="docs/pl.pdf", content=b"%PDF-1.7 hello", **values):
    if content is not None:
        path = os.path.join(org["storage"], key)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(content)
    values = {"organization_id": org["id"], "shipment_id": org["shipment"], "type": "packing_list",
              "filename": "PL 4711.pdf", "content_type": "application/pdf", "byte_size": 14,
              "storage_key": key, "scan_state": "clean", **values}
    return insert(conn, "documents", **values)


def fetch(client, path, org, method="get", **headers):
    """The whole response, with the file closed (a WSGI server closes it after sending; so must a test)."""
    response = getattr(client, method)(path, headers=auth(org["token"], **headers))
    response.get_data()
    response.close()
    return response


def test_streams_the_file(conn, client, org):
    document = make_document(conn, org)
    response = fetch(client, f"/documents/doc_{document}/file", org)
    assert response.status_code == 200
    assert response.data == b"%PDF-1.7 hello"
    assert response.headers["Content-Type"] == "application/pdf"
    assert response.headers["Content-Length"] == "14"
    assert response.headers["Content-Disposition"] == \
        "attachment; filename=\"PL 4711.pdf\"; filename*=UTF-8''PL%204711.pdf"
    assert response.headers["Service-Version"] == "2026-10-01"
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert response.headers["Cache-Control"] == "private, no-store"
    assert response.headers["ETag"].startswith("\"") and "Accept-Ranges" not in response.headers


def test_json_suffix_and_head(conn, client, org):
    document = make_document(conn, org)
    assert fetch(client, f"/documents/doc_{document}/file.json", org).data == b"%PDF-1.7 hello"
    head = fetch(client, f"/documents/doc_{document}/file", org, method="head")
    assert (head.status_code, head.data, head.headers["Content-Length"]) == (200, b"", "14")
    assert client.get(f"/documents/doc_{document}/file.pdf", headers=auth(org["token"])).status_code == 404


@pytest.mark.parametrize("stored, served", [
    ("text/csv; charset=utf-8", "text/csv; charset=utf-8"),
    ("image/png", "image/png"),
    ("Application/PDF", "Application/PDF"),
    # Well formed but not a type the description lists.
    ("application/msword", "application/octet-stream"),
    ("text/html", "application/octet-stream"),
    ("not a type", "application/octet-stream"),
    ("text/html\r\nX-Evil: 1", "application/octet-stream"),
])
def test_content_type(conn, client, org, stored, served):
    document = make_document(conn, org, content_type=stored)
    response = fetch(client, f"/documents/doc_{document}/file", org)
    assert response.headers["Content-Type"] == served
    assert "X-Evil" not in response.headers


def test_every_served_type_is_described(conn, client, org):
    download = client.get("/openapi.json").json["paths"]["/documents/{document_id}/file"]["get"]
    content = download["responses"]["200"]["content"]
    # The fallback first: generators take the first type they can read, and bytes is the right reading.
    assert list(content) == list(FILE_MEDIA_TYPES) and FILE_MEDIA_TYPES[0] == "application/octet-stream"
    assert {"application/pdf", "image/png", "image/jpeg", "text/csv"} <= set(content)
    assert all(media["schema"] == {"type": "string", "format": "binary"} for media in content.values())
    assert all(list(download["responses"][code]["content"]) == ["application/json"]
               for code in ("400", "401", "404", "429"))
    for stored in ("application/pdf", "image/jpeg", "text/csv; charset=utf-8", "application/zip", "x"):
        document = make_document(conn, org, content_type=stored)
        served = fetch(client, f"/documents/doc_{document}/file", org).headers["Content-Type"]
        assert served.split(";")[0].lower() in content, (stored, served)


@pytest.mark.parametrize("filename, header", [
    ("plain.pdf", "attachment; filename=\"plain.pdf\"; filename*=UTF-8''plain.pdf"),
    ('say "hi".pdf', "attachment; filename=\"say _hi_.pdf\"; filename*=UTF-8''say%20%22hi%22.pdf"),
    ("Lieferschein Müller.pdf",
     "attachment; filename=\"Lieferschein Muller.pdf\"; filename*=UTF-8''Lieferschein%20M%C3%BCller.pdf"),
    ("装箱单.pdf", "attachment; filename=\".pdf\"; filename*=UTF-8''%E8%A3%85%E7%AE%B1%E5%8D%95.pdf"),
    ("../../etc/passwd", "attachment; filename=\"_.._etc_passwd\"; filename*=UTF-8''_.._etc_passwd"),
    ("C:\\docs\\a.pdf", "attachment; filename=\"C:_docs_a.pdf\"; filename*=UTF-8''C%3A_docs_a.pdf"),
    ("a\r\nSet-Cookie: x\x00.pdf", "attachment; filename=\"aSet-Cookie: x.pdf\"; "
                                   "filename*=UTF-8''aSet-Cookie%3A%20x.pdf"),
    ("100%;x=1.pdf", "attachment; filename=\"100_;x=1.pdf\"; filename*=UTF-8''100%25%3Bx%3D1.pdf"),
    ("back\\slash", "attachment; filename=\"back_slash\"; filename*=UTF-8''back_slash"),
    ("\x07", "attachment; filename=\"download\"; filename*=UTF-8''download"),
    ("...", "attachment; filename=\"download\"; filename*=UTF-8''download"),
])
def test_content_disposition(filename, header):
    assert content_disposition(filename) == header


def test_content_disposition_on_the_wire(conn, client, org):
    document = make_document(conn, org, filename="Prüfbericht \"final\"\n.pdf")
    response = fetch(client, f"/documents/doc_{document}/file", org)
    assert response.headers["Content-Disposition"] == (
        "attachment; filename=\"Prufbericht _final_.pdf\"; "
        "filename*=UTF-8''Pr%C3%BCfbericht%20%22final%22.pdf")


@pytest.mark.parametrize("key, inside", [
    ("a.pdf", True), ("docs/2026/a.pdf", True), ("docs/../a.pdf", True),
    ("../secret", False), ("docs/../../secret", False), ("/etc/passwd", False), ("", False),
    ("a\x00b", False), ("..\\secret", False), (".", False), ("docs/..", False),
])
def test_storage_path(tmp_path, key, inside):
    path = storage_path(str(tmp_path), key)
    assert (path is not None) is inside
    if inside:
        assert path.startswith(str(tmp_path) + os.sep)


def test_symlink_out_of_the_folder_is_refused(tmp_path):
    (tmp_path / "outside.txt").write_bytes(b"secret")
    (tmp_path / "storage").mkdir()
    (tmp_path / "storage" / "link").symlink_to(tmp_path / "outside.txt")
    assert storage_path(str(tmp_path / "storage"), "link") is None


def test_not_downloadable_is_404(conn, client, org):
    other = make_org(conn, "other")
    hidden = make_shipment(conn, org["id"], awaiting_approval=True)
    cases = {
        "no file": make_document(conn, org, key=None, scan_state=None, content=None),
        "scanning": make_document(conn, org, key="s.pdf", scan_state="scanning"),
        "blocked": make_document(conn, org, key="b.pdf", scan_state="blocked"),
        "missing on disk": make_document(conn, org, key="gone.pdf", content=None),
        "a folder": make_document(conn, org, key="docs", content=None),
        "escaping key": make_document(conn, org, key="../outside.pdf"),
        "replaced": make_document(conn, org, key="r.pdf", record_kind="replaced"),
        "reference only": make_document(conn, org, key="o.pdf", record_kind="reference_only"),
        "hidden shipment": make_document(conn, org, key="h.pdf", shipment_id=hidden),
        "other organization": make_document(conn, {**org, "id": other}, key="f.pdf",
                                            shipment_id=make_shipment(conn, other)),
    }
    make_document(conn, org, key="docs/x.pdf")
    ids = [f"doc_{n}" for n in cases.values()] + ["doc_999999", "doc_0", "shp_1", "doc_1x"]
    for document_id in ids:
        response = client.get(f"/documents/{document_id}/file", headers=auth(org["token"]))
        assert response.status_code == 404, document_id
        assert response.headers["Service-Version"] == "2026-10-01"
        assert response.headers["Content-Type"] == "application/json"
        assert response.json["error"] == {"type": "not_found_error", "code": "resource_missing", "param": None,
                                          "message": f"No such document file: {document_id!r}."}


def test_common_rules(app, conn, client, org):
    document = make_document(conn, org)
    path = f"/documents/doc_{document}/file"
    missing = client.get(path)
    assert (missing.status_code, missing.json["error"]["code"]) == (401, "missing_token")
    version = client.get(path, headers=auth(org["token"], **{"Service-Version": "2027-01-01"}))
    assert (version.status_code, version.json["error"]["code"]) == (400, "invalid_version")
    client = with_limits(app, per_token=0).test_client()
    assert client.get(path, headers=auth(org["token"])).status_code == 429


def _rss_bytes():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def test_large_file_streams_without_growing_memory(conn, client, org):
    size = 200 * 1024 * 1024
    path = os.path.join(org["storage"], "big.bin")
    with open(path, "wb") as f:
        f.truncate(size)  # sparse: costs no disk
    try:
        document = make_document(conn, org, key="big.bin", content=None, content_type="application/octet-stream")
        before = _rss_bytes()
        response = client.get(f"/documents/doc_{document}/file", headers=auth(org["token"]), buffered=False)
        assert response.status_code == 200
        assert response.headers["Content-Length"] == str(size)
        received, peak = 0, before
        for n, chunk in enumerate(response.response):
            received += len(chunk)
            if n % 256 == 0:
                peak = max(peak, _rss_bytes())
        response.close()
        assert received == size
        assert peak - before < 32 * 1024 * 1024
    finally:
        os.remove(path)


def test_statement_count(app, conn, client, org):
    client.get("/organization", headers=auth(org["token"]))  # pins the version: one statement, once
    statement_counts(app).clear()
    small = make_document(conn, org)
    large = make_document(conn, org, key="large.bin", content=b"x" * 1_000_000)
    fetch(client, f"/documents/doc_{small}/file", org)
    fetch(client, f"/documents/doc_{large}/file", org)
    one, other = statement_counts(app)
    assert one == other
