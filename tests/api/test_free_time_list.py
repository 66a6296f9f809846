"""GET /free_time/at_risk answers, byte for byte, what GET /shipments/{id}/free_time says of each shipment.

The at-risk list is made by its own path (a candidate search, and summaries the process keeps between
requests: api/free_time.py); these tests rebuild the list from the per-shipment endpoint and the spec's
rule, on the demo data and on random data changed at random between requests.
"""
import random
import re
from datetime import datetime, time, timedelta, timezone

import pytest
from cachetools import LRUCache

from api import free_time as free_time_api
from models import db, free_time, free_time_queries
from rendering.present import dumps, present
from rendering.schemas.free_time import FreeTimeSummarySchema
from tests.support import ROOT
from tests.support.factories import auth, insert, make_container, make_org, make_shipment, make_token
from tests.support.free_time import list_at_risk

# The shipments the list considers, by the spec: ocean, not archived, not received into the warehouse, visible.
CONSIDERED_SQL = """SELECT id FROM shipments WHERE organization_id = %s AND transport_type = 'ocean' AND NOT archived
                      AND status <> 'in_warehouse' AND NOT awaiting_approval AND NOT owned_elsewhere"""
OFFSETS = (-600, -300, 0, 0, 60, 330, 600)


def listed_by_each_shipment(client, headers, conn, organization_id):
    """The list body rebuilt from each considered shipment's GET /free_time, and the port offsets seen."""
    with conn.cursor() as cur:
        cur.execute(CONSIDERED_SQL, (organization_id,))
        ids = [row["id"] for row in cur.fetchall()]
        cur.execute("SELECT DISTINCT occurred_at_offset_minutes AS offset FROM tracking_events")
        offsets = [row["offset"] for row in cur.fetchall()]
    listed = []
    for shipment_id in ids:
        response = client.get(f"/shipments/shp_{shipment_id}/free_time", headers=headers)
        assert response.status_code == 200
        # At risk, within the window: the discharge day is day 1, so up to 45 days elapsed.
        urgent = [clock["days_left"] for clock in response.json["demurrage"]
                  if clock["state"] in ("running", "overdue") and clock["free_days"] is not None
                  and clock["days_left"] <= 2 and clock["elapsed_days"] <= 45]
        if urgent:
            listed.append(((min(urgent), -shipment_id), response.get_data(as_text=True).removesuffix("\n")))
    bodies = [body for _key, body in sorted(listed)]
    return '{"object":"list","data":[' + ",".join(bodies) + '],"has_more":false}\n', len(bodies), offsets


def assert_same_list(client, headers, conn, organization_id):
    """GET /free_time/at_risk equals the list rebuilt from the per-shipment endpoint; how many it lists."""
    for _attempt in range(2):
        started = datetime.now(timezone.utc)
        served = client.get("/free_time/at_risk", headers=headers)
        expected, count, offsets = listed_by_each_shipment(client, headers, conn, organization_id)
        start, end = free_time.same_days_span(started, offsets)
        # A port's midnight between the two readings changes the answer itself: read both again.
        if start <= datetime.now(timezone.utc) < end:
            break
    assert served.status_code == 200
    assert served.get_data(as_text=True) == expected
    return count


def test_demo_at_risk_list_is_each_shipments_summary(demo_database):
    client, conn = demo_database.app.test_client(), db.connect(demo_database.url)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT id FROM organizations WHERE slug = 'acme'")
            acme = cur.fetchone()["id"]
        first = assert_same_list(client, demo_database.headers, conn, acme)
        # Again, now from the summaries this process kept.
        assert assert_same_list(client, demo_database.headers, conn, acme) == first
        assert first >= 4
    finally:
        conn.close()


def _at(rng, days_ago):
    return datetime.combine(datetime.now(timezone.utc).date() - timedelta(days=days_ago),
                            time(rng.randrange(24), rng.randrange(60)), timezone.utc)


def _random_shipment(conn, rng, org_id, number):
    """An ocean (mostly) shipment with random containers, events and terms."""
    values = {"reference": f"R-{number}", "transport_type": rng.choice(["ocean"] * 6 + ["air", None]),
              "status": rng.choice(["arrived"] * 4 + ["in_transit", "in_warehouse"]),
              "carrier_name": rng.choice(["MSC", "msc", "CMA CGM", "Maersk", None]),
              "archived": rng.random() < 0.1, "free_days_basis": rng.choice(["calendar", "working"])}
    if rng.random() < 0.25:
        values["demurrage_free_days"] = rng.randrange(0, 9)
    shipment_id = make_shipment(conn, org_id, **values)
    boxes = rng.sample(["MSCU1234567", "TGHU7654321", "CMAU0000001", "MSKU7777777"], rng.randrange(1, 4))
    for box in boxes:
        make_container(conn, shipment_id, number=box)
    for _ in range(rng.randrange(0, 2)):
        insert(conn, "arrival_notices", shipment_id=shipment_id, received_at=_at(rng, rng.randrange(20)),
               demurrage_free_days=rng.choice([None, 1, 3, 6]), detention_free_days=rng.choice([None, 2]),
               free_days_basis=rng.choice(["calendar", "working"]))
    for box in boxes + [None]:
        if box is None and rng.random() < 0.8:
            continue
        spelled = box if box is None or rng.random() < 0.8 else box.lower()[:4] + " " + box[4:7] + "-" + box[7:]
        discharged = rng.randrange(0, 50)
        events = [("loaded", discharged + 20, True), ("discharged", discharged, rng.random() < 0.9)]
        if rng.random() < 0.15:
            events.append(("discharged", max(0, discharged - rng.randrange(3)), True))
        if rng.random() < 0.4:
            events.append(("gate_out", max(0, discharged - rng.randrange(6)), True))
        if rng.random() < 0.1:
            events.append((rng.choice(["untracked", "delivered", "empty_return"]), max(0, discharged - 2), True))
        for milestone, days_ago, actual in events:
            insert(conn, "tracking_events", shipment_id=shipment_id, milestone=milestone, actual=actual,
                   occurred_at=_at(rng, days_ago), occurred_at_offset_minutes=rng.choice(OFFSETS),
                   container_number=spelled)
    return shipment_id


def _random_change(conn, rng, org_id, ids):
    """One change through SQL to a fact some summary depends on."""
    shipment_id = rng.choice(ids)
    changes = [
        ("UPDATE tracking_events SET occurred_at = occurred_at - interval '1 day' * %(n)s "
         "WHERE id = (SELECT min(id) FROM tracking_events WHERE shipment_id = %(s)s AND milestone = 'discharged')"),
        "DELETE FROM tracking_events WHERE shipment_id = %(s)s AND milestone = 'gate_out'",
        ("INSERT INTO tracking_events (shipment_id, milestone, occurred_at, occurred_at_offset_minutes) "
         "VALUES (%(s)s, 'gate_out', now() - interval '1 hour', 0)"),
        ("INSERT INTO tracking_events (shipment_id, milestone, occurred_at, occurred_at_offset_minutes) "
         "VALUES (%(s)s, 'discharged', now() - interval '1 day' * %(n)s, 600)"),
        "UPDATE tracking_events SET occurred_at_offset_minutes = -600 WHERE shipment_id = %(s)s",
        "UPDATE shipments SET demurrage_free_days = %(n)s WHERE id = %(s)s",
        "UPDATE shipments SET archived = NOT archived WHERE id = %(s)s",
        "UPDATE shipments SET status = 'in_warehouse' WHERE id = %(s)s",
        "UPDATE shipments SET reference = reference || 'x', transport_reference = 'MEDU' || %(n)s WHERE id = %(s)s",
        "UPDATE carrier_terms SET demurrage_free_days = %(n)s WHERE organization_id = %(o)s AND carrier = 'msc'",
        "INSERT INTO arrival_notices (shipment_id, demurrage_free_days) VALUES (%(s)s, %(n)s)",
        "UPDATE containers SET number = 'ZZZU' || lpad(id::text, 7, '0') WHERE shipment_id = %(s)s",
    ]
    with conn.cursor() as cur:
        cur.execute(rng.choice(changes), {"s": shipment_id, "n": rng.randrange(0, 7), "o": org_id})


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_at_risk_list_is_each_shipments_summary(conn, client, seed):
    rng = random.Random(seed)
    org_id = make_org(conn, "acme")
    insert(conn, "carrier_terms", organization_id=org_id, carrier="msc", demurrage_free_days=5,
           detention_free_days=4)
    insert(conn, "carrier_terms", organization_id=org_id, carrier="cma cgm", demurrage_free_days=3,
           detention_free_days=2, free_days_basis="working")
    headers = auth(make_token(conn, org_id))
    ids = [_random_shipment(conn, rng, org_id, number) for number in range(60)]
    counts = [assert_same_list(client, headers, conn, org_id)]
    for _round in range(8):
        for _ in range(6):
            _random_change(conn, rng, org_id, ids)
        counts.append(assert_same_list(client, headers, conn, org_id))
    assert min(counts) > 0 and len(set(counts)) > 1


def test_kept_summaries_follow_the_ports_midnight(conn, monkeypatch):
    """A summary kept before a port's midnight is not served after it (here: 2 days left become 1)."""
    org_id = make_org(conn, "acme")
    shipment_id = make_shipment(conn, org_id, transport_type="ocean", status="arrived", carrier_name="MSC",
                                demurrage_free_days=4)
    make_container(conn, shipment_id, number="MSCU1234567")
    # Discharged on 03-08 at a +10:00 port; its midnight of 03-10 is 14:00 UTC on 03-09.
    insert(conn, "tracking_events", shipment_id=shipment_id, milestone="discharged",
           occurred_at=datetime(2026, 3, 7, 20, 0, tzinfo=timezone.utc), occurred_at_offset_minutes=600,
           container_number="MSCU1234567")
    monkeypatch.setattr(free_time_api, "_summaries", {})
    midnight = datetime(2026, 3, 9, 14, 0, tzinfo=timezone.utc)
    served = []
    for now in (midnight - timedelta(microseconds=1), midnight, midnight + timedelta(hours=9)):
        rows = free_time_queries.at_risk_candidates(conn, org_id, now)
        bodies = free_time_api.at_risk_bodies(rows, now, "2026-10-01")
        assert bodies == [dumps(present("free_time_summary", FreeTimeSummarySchema, summary, "2026-10-01"))
                          for summary in list_at_risk(conn, org_id, now)]
        served.append(bodies)
    assert [len(bodies) for bodies in served] == [1, 1, 1]
    assert served[0] != served[1] == served[2]
    assert '"days_left":2' in served[0][0] and '"days_left":1' in served[1][0]


def test_a_full_store_of_summaries_drops_the_least_recently_used(conn, client, monkeypatch):
    org_id = make_org(conn, "acme")
    insert(conn, "carrier_terms", organization_id=org_id, carrier="msc", demurrage_free_days=5, detention_free_days=4)
    headers = auth(make_token(conn, org_id))
    rng = random.Random(7)
    for number in range(12):
        _random_shipment(conn, rng, org_id, number)
    monkeypatch.setattr(free_time_api, "_summaries", LRUCache(maxsize=3))
    assert assert_same_list(client, headers, conn, org_id) == assert_same_list(client, headers, conn, org_id)
    assert len(free_time_api._summaries) <= 3


def test_the_free_time_index_holds_exactly_the_events_the_engine_reads():
    """tracking_events_free_time_idx's milestones are EVENT_MILESTONES: fewer would drop facts from the index
    (the planner would then not use it), more would make it bigger for nothing."""
    schema = (ROOT / "schema.sql").read_text()
    definition = re.search(r"CREATE INDEX IF NOT EXISTS tracking_events_free_time_idx .*?;", schema, re.S).group(0)
    listed = re.search(r"WHERE milestone IN \((.*?)\);", definition, re.S).group(1)
    assert re.findall(r"'(\w+)'", listed) == free_time_queries.EVENT_MILESTONES
