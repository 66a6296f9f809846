"""A shipment moved to another organization in SQL: gone for the old one at once, new to the other."""
import psycopg2
import pytest

from tests.support.changes import feed, ids_and_revisions
from tests.support.factories import auth, insert, make_container, make_label, make_org, make_shipment, make_token


@pytest.fixture
def orgs(conn):
    """Two organizations, each {"id", "token"}."""
    made = {}
    for slug in ("old", "new"):
        org_id = make_org(conn, slug)
        made[slug] = {"id": org_id, "token": make_token(conn, org_id)}
    return made["old"], made["new"]


def sql(conn, statement, *args):
    with conn.cursor() as cur:
        cur.execute(statement, args)


def get(client, org, path):
    return client.get(path, headers=auth(org["token"]))


def furnished_shipment(conn, org_id):
    """A visible shipment with a container, a label, a document, a packing list with a line, an alert, a check."""
    shipment = make_shipment(conn, org_id, reference="S-MOVE")
    make_container(conn, shipment, number="MSCU1234565")
    label = make_label(conn, org_id, "urgent", shipment_ids=[shipment])
    document = insert(conn, "documents", organization_id=org_id, shipment_id=shipment, type="packing_list",
                      filename="pl.pdf")
    packing_list = insert(conn, "packing_lists", organization_id=org_id, shipment_id=shipment, document_id=document)
    pallet = insert(conn, "pallets", shipment_id=shipment, packing_list_id=packing_list, pallet_number="P1")
    insert(conn, "packing_lines", pallet_id=pallet, shipment_id=shipment, line_index=1, produce_name="Kiwi",
           box_count=10)
    sql(conn, "INSERT INTO alert_kinds (key, \"group\") VALUES ('late', 'eta') ON CONFLICT DO NOTHING")
    alert = insert(conn, "alerts", organization_id=org_id, shipment_id=shipment, key="late", title="Late")
    insert(conn, "checks", organization_id=org_id, shipment_id=shipment, key="k", category="c", title="t",
           status="failed")
    return {"shipment": shipment, "label": label, "document": document, "alert": alert}


def test_the_old_organization_sees_a_deletion_at_once_and_the_new_one_a_new_shipment(conn, client, orgs):
    old, new = orgs
    made = furnished_shipment(conn, old["id"])
    shipment, label, document = made["shipment"], made["label"], made["document"]
    old_cursor, new_cursor = feed(client, old)["next_since"], feed(client, new)["next_since"]
    assert get(client, old, f"/shipments/shp_{shipment}").json["labels"][0]["id"] == f"lbl_{label}"

    sql(conn, "UPDATE shipments SET organization_id = %s WHERE id = %s", new["id"], shipment)

    # The old organization: a deletion in its feed, and every read of the shipment and its rows a 404.
    assert feed(client, old, old_cursor)["data"] == [
        {"object": "shipment", "id": f"shp_{shipment}", "deleted": True, "revision": 8}]
    for path in (f"/shipments/shp_{shipment}", f"/shipments/shp_{shipment}/documents",
                 f"/shipments/shp_{shipment}/packing_lists", f"/documents/doc_{document}",
                 f"/documents/doc_{document}/data", f"/shipments/shp_{shipment}/timeline"):
        assert get(client, old, path).status_code == 404, path
    assert get(client, old, "/shipments").json["data"] == []
    assert get(client, old, f"/shipments?labels=lbl_{label}").json["data"] == []
    assert get(client, old, "/alerts").json["data"] == [] and get(client, old, "/checks").json["data"] == []

    # The new organization: the whole shipment, new to its feed, with nothing of the old organization.
    body = feed(client, new, new_cursor)
    assert ids_and_revisions(body) == [(f"shp_{shipment}", 8, False)]
    shown = get(client, new, f"/shipments/shp_{shipment}").json
    assert (shown["labels"], shown["containers"][0]["number"], shown["cargo"]["boxes"], shown["checks"]["failed"]) \
        == ([], "MSCU1234565", 10, 1)
    assert body["data"][0] == shown
    assert get(client, new, f"/shipments?labels=lbl_{label}").json["data"] == []
    # Everything listed under the shipment is reachable by its own URL.
    documents = get(client, new, f"/shipments/shp_{shipment}/documents").json["data"]
    lists = get(client, new, f"/shipments/shp_{shipment}/packing_lists").json["data"]
    assert [d["id"] for d in documents] == [lists[0]["document_id"]] == [f"doc_{document}"]
    assert get(client, new, f"/documents/doc_{document}").json["id"] == f"doc_{document}"
    assert get(client, new, f"/documents/doc_{document}/data").status_code == 200
    assert [a["id"] for a in get(client, new, "/alerts").json["data"]] == [f"alr_{made['alert']}"]
    assert len(get(client, new, "/checks").json["data"]) == 1


@pytest.mark.parametrize("statements", [
    ["UPDATE shipments SET organization_id = %(new)s, awaiting_approval = true WHERE id = %(shipment)s"],
    ["UPDATE shipments SET organization_id = %(new)s WHERE id = %(shipment)s",
     "UPDATE shipments SET owned_elsewhere = true WHERE id = %(shipment)s"],
], ids=["one statement", "two statements"])
def test_moved_and_hidden_in_one_transaction_never_appears_to_the_new_organization(conn, client, orgs, statements):
    old, new = orgs
    shipment = make_shipment(conn, old["id"])
    old_cursor, new_cursor = feed(client, old)["next_since"], feed(client, new)["next_since"]
    with conn:
        conn.autocommit = False
        for statement in statements:
            sql(conn, statement.replace("%(new)s", str(new["id"])).replace("%(shipment)s", str(shipment)))
    conn.autocommit = True
    assert ids_and_revisions(feed(client, old, old_cursor)) == [(f"shp_{shipment}", 2, True)]
    assert feed(client, new, new_cursor)["data"] == []
    # Shown later: it comes whole, as any shipment that becomes visible.
    sql(conn, "UPDATE shipments SET awaiting_approval = false, owned_elsewhere = false WHERE id = %s", shipment)
    assert ids_and_revisions(feed(client, new, new_cursor)) == [(f"shp_{shipment}", 3, False)]


def test_inserted_and_hidden_in_one_transaction_never_appears(conn, client, orgs):
    old, _new = orgs
    cursor = feed(client, old)["next_since"]
    with conn:
        conn.autocommit = False
        shipment = make_shipment(conn, old["id"])
        sql(conn, "UPDATE shipments SET awaiting_approval = true WHERE id = %s", shipment)
    conn.autocommit = True
    assert feed(client, old, cursor)["data"] == []


def test_every_organization_it_leaves_keeps_its_deletion_and_one_it_returns_to_gets_it_whole(conn, client, orgs):
    first, second = orgs
    third_id = make_org(conn, "third")
    third = {"id": third_id, "token": make_token(conn, third_id)}
    shipment = make_shipment(conn, first["id"])
    cursors = {slug: feed(client, org)["next_since"] for slug, org in (("1", first), ("2", second), ("3", third))}
    sql(conn, "UPDATE shipments SET organization_id = %s WHERE id = %s", second["id"], shipment)
    sql(conn, "UPDATE shipments SET organization_id = %s WHERE id = %s", third["id"], shipment)
    # Neither of the first two polled in between: each still learns that it is gone.
    assert ids_and_revisions(feed(client, first, cursors["1"])) == [(f"shp_{shipment}", 2, True)]
    assert ids_and_revisions(feed(client, second, cursors["2"])) == [(f"shp_{shipment}", 3, True)]
    assert ids_and_revisions(feed(client, third, cursors["3"])) == [(f"shp_{shipment}", 3, False)]
    cursor = feed(client, first, cursors["1"])["next_since"]
    sql(conn, "UPDATE shipments SET organization_id = %s WHERE id = %s", first["id"], shipment)
    assert ids_and_revisions(feed(client, first, cursor)) == [(f"shp_{shipment}", 4, False)]
    assert ids_and_revisions(feed(client, first)) == [(f"shp_{shipment}", 4, False)]


def test_a_row_of_another_organization_on_a_shipment_is_refused(conn, orgs):
    old, new = orgs
    shipment = make_shipment(conn, old["id"])
    for table, values in (("documents", {"type": "invoice", "filename": "i.pdf"}), ("packing_lists", {}),
                          ("containers", {}), ("check_runs", {})):
        with pytest.raises(psycopg2.errors.ForeignKeyViolation, match=f"{table}_shipment_organization_fkey"):
            insert(conn, table, organization_id=new["id"], shipment_id=shipment, **values)
    document = insert(conn, "documents", organization_id=old["id"], shipment_id=shipment, type="invoice",
                      filename="i.pdf")
    with pytest.raises(psycopg2.errors.ForeignKeyViolation, match="documents_shipment_organization_fkey"):
        sql(conn, "UPDATE documents SET organization_id = %s WHERE id = %s", new["id"], document)


def test_webhook_history_about_a_moved_shipment_is_no_longer_listed_to_the_old_organization(conn, client, orgs):
    old, new = orgs
    shipment = make_shipment(conn, old["id"])
    event = insert(conn, "events", organization_id=old["id"], type="shipment.status_changed", shipment_id=shipment,
                   state="rendered", body='{"id": "msg_1"}')
    assert [item["id"] for item in get(client, old, "/events").json["data"]] == ["msg_1"]
    sql(conn, "UPDATE shipments SET organization_id = %s WHERE id = %s", new["id"], shipment)
    assert get(client, old, "/events").json["data"] == []
    assert get(client, old, f"/events/msg_{event}").status_code == 404
    assert get(client, new, "/events").json["data"] == []
