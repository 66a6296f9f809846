"""GET /shipments: visibility, filters and keyset paging."""
import pytest

from tests.support.factories import auth, make_container, make_label, make_org, make_shipment, make_token


@pytest.fixture
def token(conn):
    return make_token(conn, make_org(conn, "acme"))


def ids(client, token, query=""):
    response = client.get(f"/shipments?{query}", headers=auth(token))
    assert response.status_code == 200, response.json
    return [int(item["id"].removeprefix("shp_")) for item in response.json["data"]]


def test_empty_list(client, token):
    response = client.get("/shipments", headers=auth(token))
    assert response.status_code == 200
    assert response.json == {"object": "list", "data": [], "has_more": False}
    assert response.headers["Content-Type"] == "application/json"


@pytest.mark.parametrize("query", ["", "archived=any", "archived=true", "q=HIDDEN", "status=draft",
                                   "starting_after=shp_99"])
def test_hidden_and_foreign_shipments_never_listed(conn, client, token, query):
    globex = make_org(conn, "globex")
    visible = make_shipment(conn, 1, reference="SEEN-1")
    visible_archived = make_shipment(conn, 1, reference="SEEN-2", archived=True)
    for archived in (False, True):
        make_shipment(conn, 1, reference=f"HIDDEN-A{archived}", awaiting_approval=True, archived=archived)
        make_shipment(conn, 1, reference=f"HIDDEN-O{archived}", owned_elsewhere=True, archived=archived)
        make_shipment(conn, globex, reference=f"HIDDEN-G{archived}", archived=archived)
    expected = {"": [visible], "archived=any": [visible_archived, visible], "archived=true": [visible_archived],
                "q=HIDDEN": [], "status=draft": [visible], "starting_after=shp_99": [visible]}[query]
    assert ids(client, token, query) == expected


def test_archived_filter(conn, client, token):
    active = make_shipment(conn, 1)
    archived = make_shipment(conn, 1, archived=True)
    assert ids(client, token) == [active]
    assert ids(client, token, "archived=false") == [active]
    assert ids(client, token, "archived=true") == [archived]
    assert ids(client, token, "archived=any") == [archived, active]


def test_newest_first_by_id_not_by_creation_time(conn, client, token):
    first = make_shipment(conn, 1, created_at="2026-05-01T00:00:00Z")
    second = make_shipment(conn, 1, created_at="2026-01-01T00:00:00Z")
    third = make_shipment(conn, 1, created_at="2026-03-01T00:00:00Z")
    assert ids(client, token) == [third, second, first]


def test_status_filter(conn, client, token):
    made = {status: make_shipment(conn, 1, status=status)
            for status in ("draft", "validated", "in_transit", "arrived", "in_warehouse", "error")}
    assert ids(client, token, "status=arrived,draft") == [made["arrived"], made["draft"]]
    assert ids(client, token) == sorted(made.values(), reverse=True)


def test_labels_require_all(conn, client, token):
    a, b, c = (make_shipment(conn, 1) for _ in range(3))
    globex = make_org(conn, "globex")
    red = make_label(conn, 1, "red", shipment_ids=[a, b])
    blue = make_label(conn, 1, "blue", shipment_ids=[b, c])
    foreign = make_label(conn, globex, "red")
    assert ids(client, token, f"labels=lbl_{red}") == [b, a]
    assert ids(client, token, f"labels=lbl_{blue}") == [c, b]
    assert ids(client, token, f"labels=lbl_{red},lbl_{blue}") == [b]
    assert ids(client, token, f"labels=lbl_{red},lbl_{foreign}") == []


def test_created_bounds_are_inclusive_and_a_date_is_midnight(conn, client, token):
    early = make_shipment(conn, 1, created_at="2026-03-01T00:00:00Z")
    midday = make_shipment(conn, 1, created_at="2026-03-01T12:00:00Z")
    late = make_shipment(conn, 1, created_at="2026-03-01T23:59:59.999Z")
    next_day = make_shipment(conn, 1, created_at="2026-03-02T00:00:00Z")
    assert ids(client, token, "created_before=2026-03-01") == [early]
    assert ids(client, token, "created_after=2026-03-01") == [next_day, late, midday, early]
    assert ids(client, token, "created_after=2026-03-02") == [next_day]
    assert ids(client, token, "created_before=2026-03-02") == [next_day, late, midday, early]
    assert ids(client, token, "created_after=2026-03-01T12:00:00Z&created_before=2026-03-01T12:00:00Z") == [midday]
    # `late` (23:59:59.999) is shown as 23:59:59, so a bound of 23:59:59 includes it.
    assert ids(client, token, "created_after=2026-03-01T13:00:00%2B01:00&created_before=2026-03-01T23:59:59Z") \
        == [late, midday]
    assert ids(client, token, "created_after=2026-03-01T13:00:00%2B01:00&created_before=2026-03-01T23:59:58Z") \
        == [midday]
    assert ids(client, token, "created_after=2026-03-02&created_before=2026-03-01") == []


def test_eta_filters_compare_effective_eta(conn, client, token):
    own_eta = make_shipment(conn, 1, eta="2026-04-10T00:00:00Z")
    container_eta = make_shipment(conn, 1)
    make_container(conn, container_eta, eta="2026-04-20T00:00:00Z")
    make_container(conn, container_eta, eta="2026-04-15T00:00:00Z")
    # Its own eta wins over the containers'.
    both = make_shipment(conn, 1, eta="2026-04-01T00:00:00Z")
    make_container(conn, both, eta="2026-04-30T00:00:00Z")
    no_eta = make_shipment(conn, 1)
    make_container(conn, no_eta)
    assert ids(client, token) == [no_eta, both, container_eta, own_eta]
    assert ids(client, token, "eta_after=2026-04-12") == [container_eta]
    assert ids(client, token, "eta_after=2026-04-15T00:00:00Z") == [container_eta]
    assert ids(client, token, "eta_before=2026-04-10") == [both, own_eta]
    assert ids(client, token, "eta_after=2026-04-10&eta_before=2026-04-15") == [container_eta, own_eta]
    assert ids(client, token, "eta_after=1900-01-01") == [both, container_eta, own_eta]
    assert ids(client, token, "eta_before=2999-01-01") == [both, container_eta, own_eta]


@pytest.mark.parametrize("param, column, field", [
    ("created", "created_at", "created_at"), ("eta", "eta", "effective_eta")])
def test_time_bounds_compare_at_the_shown_precision(conn, client, token, param, column, field):
    # Stored to the microsecond, shown to the second: a bound copied from a response finds its item.
    before = make_shipment(conn, 1, **{column: "2026-03-01T11:59:59.999999Z"})
    item = make_shipment(conn, 1, **{column: "2026-03-01T12:00:00.654321Z"})
    after = make_shipment(conn, 1, **{column: "2026-03-01T12:00:01Z"})
    shown = client.get(f"/shipments/shp_{item}", headers=auth(token)).json[field]
    assert shown == "2026-03-01T12:00:00Z"
    assert ids(client, token, f"{param}_after={shown}&{param}_before={shown}") == [item]
    assert ids(client, token, f"{param}_after={shown}") == [after, item]
    assert ids(client, token, f"{param}_before={shown}") == [item, before]
    # A bound with a fraction compares against the shown value too: 12:00:00 is before 12:00:00.5.
    assert ids(client, token, f"{param}_before=2026-03-01T12:00:00.5Z") == [item, before]
    assert ids(client, token, f"{param}_after=2026-03-01T12:00:00.5Z") == [after]
    assert ids(client, token, f"{param}_after=2026-03-01T11:59:59.000001Z&{param}_before=2026-03-01T11:59:59Z") \
        == []


def test_containers_oldest_first_by_creation_time_then_id(conn, client, token):
    shipment = make_shipment(conn, 1)
    late = make_container(conn, shipment, created_at="2026-03-05T00:00:00Z")
    early = make_container(conn, shipment, created_at="2026-03-01T00:00:00Z")
    same_second_b = make_container(conn, shipment, created_at="2026-03-03T10:00:00.900Z")
    same_second_a = make_container(conn, shipment, created_at="2026-03-03T10:00:00.100Z")
    expected = [f"ctr_{early}", f"ctr_{same_second_b}", f"ctr_{same_second_a}", f"ctr_{late}"]
    listed = client.get("/shipments", headers=auth(token)).json["data"][0]
    found = client.get(f"/shipments/shp_{shipment}", headers=auth(token)).json
    assert [item["id"] for item in listed["containers"]] == expected
    assert [item["id"] for item in found["containers"]] == expected


def test_eta_filter_follows_container_changes(conn, client, token):
    shipment = make_shipment(conn, 1)
    container = make_container(conn, shipment, eta="2026-04-20T00:00:00Z")
    assert ids(client, token, "eta_before=2026-04-21") == [shipment]
    with conn.cursor() as cur:
        cur.execute("UPDATE containers SET eta = '2026-05-01T00:00:00Z' WHERE id = %s", (container,))
    assert ids(client, token, "eta_before=2026-04-21") == []
    with conn.cursor() as cur:
        cur.execute("DELETE FROM containers WHERE id = %s", (container,))
    assert ids(client, token, "eta_after=1900-01-01") == []


def test_filters_combine_with_and(conn, client, token):
    match = make_shipment(conn, 1, status="arrived", consignee="Fresh Foods", eta="2026-04-10T00:00:00Z",
                          created_at="2026-03-05T00:00:00Z")
    make_label(conn, 1, "red", shipment_ids=[match])
    make_shipment(conn, 1, status="draft", consignee="Fresh Foods", eta="2026-04-10T00:00:00Z")
    make_shipment(conn, 1, status="arrived", consignee="Other", eta="2026-04-10T00:00:00Z")
    make_shipment(conn, 1, status="arrived", consignee="Fresh Foods", eta="2026-06-10T00:00:00Z")
    make_shipment(conn, 1, status="arrived", consignee="Fresh Foods", eta="2026-04-10T00:00:00Z",
                  archived=True)
    query = "status=arrived&q=fresh&eta_before=2026-05-01&labels=lbl_1&created_after=2026-03-01"
    assert ids(client, token, query) == [match]


@pytest.mark.parametrize("limit", [1, 2, 3, 7, 100])
def test_keyset_paging_without_gaps_or_repeats_while_shipments_arrive(conn, client, token, limit):
    original = [make_shipment(conn, 1) for _ in range(7)]
    make_shipment(conn, 1, awaiting_approval=True)
    seen, query, pages = [], f"limit={limit}", 0
    while True:
        response = client.get(f"/shipments?{query}", headers=auth(token))
        assert response.status_code == 200
        page = [int(item["id"].removeprefix("shp_")) for item in response.json["data"]]
        assert len(page) <= limit
        seen += page
        pages += 1
        # New shipments arrive (and one is approved) between pages.
        make_shipment(conn, 1)
        if not response.json["has_more"]:
            break
        assert len(page) == limit
        query = f"limit={limit}&starting_after=shp_{page[-1]}"
    assert seen == sorted(original, reverse=True)
    assert pages == max(1, -(-len(original) // limit))


def test_has_more_is_exact(conn, client, token):
    for _ in range(3):
        make_shipment(conn, 1)
    assert client.get("/shipments?limit=3", headers=auth(token)).json["has_more"] is False
    assert client.get("/shipments?limit=2", headers=auth(token)).json["has_more"] is True
    assert client.get("/shipments?limit=2&starting_after=shp_3", headers=auth(token)).json["has_more"] is False
    hidden_tail = make_shipment(conn, 1, awaiting_approval=True)
    assert hidden_tail == 4
    assert client.get("/shipments?limit=3", headers=auth(token)).json["has_more"] is False


def test_list_items_are_full_shipments(conn, client, token):
    shipment = make_shipment(conn, 1, reference="FULL-1", consignor="A", draft_produce=["Mango"])
    make_container(conn, shipment, number="MSKU1234565", eta="2026-04-01T00:00:00Z")
    make_label(conn, 1, "red", shipment_ids=[shipment])
    listed = client.get("/shipments", headers=auth(token)).json["data"]
    single = client.get(f"/shipments/shp_{shipment}", headers=auth(token)).json
    assert listed == [single]
