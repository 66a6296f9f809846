"""Renderings a worker keeps: a page named by its stored MD5s is joined from memory, never stale, in one statement."""
import pytest

from rendering import shipment_renderings
from tests.support.counting import statement_counts
from tests.support.factories import auth, make_container, make_org, make_shipment, make_token


def sql(conn, statement, *args):
    with conn.cursor() as cur:
        cur.execute(statement, args)


@pytest.fixture
def kept(monkeypatch):
    """A store of its own for the test (the module's is shared by every test of the process)."""
    store = {}
    monkeypatch.setattr(shipment_renderings, "_kept", store)
    monkeypatch.setattr(shipment_renderings, "_kept_bytes", 0)
    return store


def forget(kept):
    """What a new worker keeps: nothing."""
    kept.clear()
    shipment_renderings._kept_bytes = 0     # the fixture `kept` puts the module's count back after the test


@pytest.fixture
def acme(conn, app, client):
    token = make_token(conn, make_org(conn, "acme"))
    shipments = [make_shipment(conn, 1, reference=f"R-{number}") for number in range(3)]
    for shipment in shipments:
        make_container(conn, shipment, eta="2026-04-01T00:00:00Z")
    client.get("/organization", headers=auth(token))                   # the version pin is a one-off statement
    return token, shipments


def get(app, client, token, path):
    counts = statement_counts(app)
    counts.clear()
    response = client.get(path, headers=auth(token))
    assert response.status_code == 200
    return response, counts[0]


def test_a_worker_reads_each_rendering_once_then_serves_it_from_memory(app, client, acme, kept):
    token, shipments = acme
    made, statements = get(app, client, token, "/shipments")
    assert statements == 5          # the count and page; the shipments, containers and labels; the store
    assert len(kept) == 3
    forget(kept)                    # another worker: the renderings are stored, not kept
    read, statements = get(app, client, token, "/shipments")
    assert (statements, read.get_data(), read.headers["ETag"]) == (2, made.get_data(), made.headers["ETag"])
    again, statements = get(app, client, token, "/shipments")
    assert (statements, again.get_data(), again.headers["ETag"]) == (1, made.get_data(), made.headers["ETag"])
    one, statements = get(app, client, token, f"/shipments/shp_{shipments[0]}")
    assert (statements, one.json["reference"]) == (1, "R-0")


def test_a_rendering_changed_behind_the_api_is_served_as_stored_now(conn, app, client, acme, kept):
    token, shipments = acme
    before, _ = get(app, client, token, "/shipments")
    sql(conn, "UPDATE shipment_renderings SET body = replace(body, '\"R-1\"', '\"R-1-edited\"') "
              "WHERE shipment_id = %s", shipments[1])
    after, statements = get(app, client, token, "/shipments")
    assert statements == 2          # the count and page, then the one rendering whose MD5 is new
    assert [item["reference"] for item in after.json["data"]] == ["R-2", "R-1-edited", "R-0"]
    assert after.headers["ETag"] != before.headers["ETag"]
    sql(conn, "UPDATE shipments SET notes = 'changed' WHERE id = %s", shipments[2])
    changed, _ = get(app, client, token, "/shipments")
    assert changed.json["data"][0]["notes"] == "changed"


def test_a_store_smaller_than_a_page_serves_the_same_bytes(app, client, acme, kept, monkeypatch):
    token, _shipments = acme
    full, _ = get(app, client, token, "/shipments")
    monkeypatch.setattr(shipment_renderings, "KEPT_BYTES", len(full.get_data()) // 3)   # one rendering, not three
    forget(kept)
    for _ in range(3):
        response, statements = get(app, client, token, "/shipments")
        assert (statements, response.get_data(), response.headers["ETag"]) == (2, full.get_data(),
                                                                              full.headers["ETag"])
        assert len(kept) == 1
        assert shipment_renderings._kept_bytes == len(next(iter(kept.values())))


def test_a_shipment_gone_between_the_page_and_its_rendering_is_left_out(conn, app, client, acme, kept, monkeypatch):
    token, shipments = acme
    get(app, client, token, "/shipments")
    forget(kept)
    real = shipment_renderings.shipments.stored_bodies

    def deleted_meanwhile(conn_, ids, api_version, renderer):
        sql(conn, "DELETE FROM shipments WHERE id = %s", shipments[0])
        return real(conn_, ids, api_version, renderer)
    monkeypatch.setattr(shipment_renderings.shipments, "stored_bodies", deleted_meanwhile)
    response, _ = get(app, client, token, "/shipments")
    assert [item["reference"] for item in response.json["data"]] == ["R-2", "R-1"]


def test_past_the_bound_the_oldest_kept_go_first(kept, monkeypatch):
    monkeypatch.setattr(shipment_renderings, "KEPT_BYTES", 10)
    shipment_renderings.keep([(1, b"aaaa", "m1"), (2, b"bbbb", "m2")])
    shipment_renderings.keep([(2, b"bbbb", "m2")])                   # kept already: counted once
    assert (list(kept), shipment_renderings._kept_bytes) == ([(1, "m1"), (2, "m2")], 8)
    shipment_renderings.keep([(3, b"cccc", "m3")])
    assert (list(kept), shipment_renderings._kept_bytes) == ([(2, "m2"), (3, "m3")], 8)
    shipment_renderings.keep([(4, b"d" * 11, "m4")])                 # larger than the bound: nothing stays
    assert (kept, shipment_renderings._kept_bytes) == ({}, 0)
