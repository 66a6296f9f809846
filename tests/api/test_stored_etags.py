"""ETags of stored renderings: made of the MD5s the database keeps, equal exactly when the body-hash ETag is."""
import hashlib
import json

from api.conditional import body_etag, stored_etag
from rendering import versions
from tests.support.factories import auth, insert, make_org, make_shipment, make_token


def sql(conn, statement, *args):
    with conn.cursor() as cur:
        cur.execute(statement, args)



def stored(path):
    """Whether `path`'s ETag is made of stored MD5s; the others hash their body (api/conditional.py body_etag)."""
    return path.startswith("/shipments") and not path.endswith("/timeline")


def md5(text):
    return hashlib.md5(text.encode()).hexdigest()


def stored_text(document):
    """A stored rendering's text from the document the API sent (dumps: compact, ASCII, keys as sent)."""
    return json.dumps(document, ensure_ascii=True, separators=(",", ":"))


def observe(client, token, paths):
    """{path: (ETag, the body-hash ETag of its body, the parsed body)} of a GET of each path."""
    seen = {}
    for path in paths:
        response = client.get(path, headers=auth(token))
        assert response.status_code == 200, (path, response.json)
        body = response.get_data()
        seen[path] = (response.headers["ETag"].strip('"'), body_etag(versions.LATEST, body), json.loads(body))
    return seen


def test_stored_etags_change_exactly_when_the_body_does_on_every_route(conn, client):
    org_id = make_org(conn, "acme")
    token = make_token(conn, org_id)
    first, second = make_shipment(conn, org_id, reference="A-1"), make_shipment(conn, org_id, reference="B-2")
    packing_list = insert(conn, "packing_lists", organization_id=org_id, shipment_id=first)
    insert(conn, "pallets", shipment_id=first, packing_list_id=packing_list, pallet_number="P1")
    paths = ["/organization", "/shipments", "/shipments?limit=1", "/shipments?limit=2", "/shipments?archived=any",
             f"/shipments?limit=1&starting_after=shp_{second}", f"/shipments/shp_{first}", f"/shipments/shp_{second}",
             f"/shipments/shp_{first}/packing_lists", f"/shipments/shp_{first}/timeline", "/alerts", "/checks"]
    rounds = [observe(client, token, paths)]                            # every rendering made now
    rounds.append(observe(client, token, paths))                        # every one as stored
    sql(conn, "DELETE FROM shipment_renderings")
    rounds.append(observe(client, token, paths))                        # made again: the same bodies
    sql(conn, "UPDATE shipments SET notes = 'changed' WHERE id = %s", first)
    rounds.append(observe(client, token, paths))
    sql(conn, "UPDATE shipments SET archived = true WHERE id = %s", second)
    rounds.append(observe(client, token, paths))
    insert(conn, "pallets", shipment_id=first, packing_list_id=packing_list, pallet_number="P2")
    rounds.append(observe(client, token, paths))
    rounds.append(observe(client, token, paths))
    for path in paths:
        pairs = [(seen[path][0], seen[path][1]) for seen in rounds]
        for etag, hashed in pairs:
            for other_etag, other_hashed in pairs:
                assert (etag == other_etag) == (hashed == other_hashed), path
        if stored(path):
            for etag, _hashed, document in (seen[path] for seen in rounds):
                if path.endswith("/packing_lists"):         # one stored rendering, the whole list
                    assert etag == stored_etag(versions.LATEST, md5(stored_text(document))), path
                    continue
                items = document["data"] if document.get("object") == "list" else [document]
                digest = md5(",".join(md5(stored_text(item)) for item in items))
                assert etag == stored_etag(versions.LATEST, digest, document.get("has_more", False)), path
        else:
            assert all(etag == hashed for etag, hashed in pairs), path
    # The body changed where it should have: the notes, the archiving, the pallet.
    assert rounds[2][f"/shipments/shp_{first}"][0] == rounds[0][f"/shipments/shp_{first}"][0]
    assert rounds[3][f"/shipments/shp_{first}"][0] != rounds[2][f"/shipments/shp_{first}"][0]
    assert rounds[4]["/shipments"][0] != rounds[3]["/shipments"][0]
    assert rounds[5]["/shipments?limit=1"][0] != rounds[4]["/shipments?limit=1"][0]


def test_a_stored_etag_is_answered_304_on_the_one_statement(conn, app, client):
    from tests.support.counting import statement_counts
    org_id = make_org(conn, "acme")
    token = make_token(conn, org_id)
    make_shipment(conn, org_id)
    client.get("/organization", headers=auth(token))                   # the version pin is a one-off statement
    etag = client.get("/shipments", headers=auth(token)).headers["ETag"]
    counts = statement_counts(app)
    counts.clear()
    response = client.get("/shipments", headers=auth(token, **{"If-None-Match": etag}))
    assert (response.status_code, response.get_data(), response.headers["ETag"]) == (304, b"", etag)
    assert counts == [2]                    # the count with the page, then the 304 moved to its own budget
