"""One organization's backlog does not hold up another's webhooks: rendering and claiming take turns.

Each test makes a real backlog of 20,000 events of one organization in one statement and one event of
another organization through the outbox triggers, runs a real pass to a real HTTPS receiver, and asserts
where the other organization's delivery came in the order of the work (the attempts' ids are the claims'
order), never how long it took.
"""
import json

from delivery.outbox import RENDER_BATCH
from models import events
from tests.support.factories import make_org, make_shipment
from tests.support.webhooks import add_endpoint, delivery_settings, run_pass

BACKLOG = 20_000


def backlog_of(conn, org, state="pending"):
    """BACKLOG status changes of one shipment of `org`, written as the triggers write them, in one statement."""
    shipment = make_shipment(conn, org)
    with conn.cursor() as cur:
        cur.execute("""
            INSERT INTO events (organization_id, type, shipment_id, previous_attributes, state, body, rendered_at)
            SELECT %(org)s, 'shipment.status_changed', %(shipment)s, '{"status": "draft"}', %(state)s,
                   CASE WHEN %(state)s = 'rendered' THEN '{"backlog": true}' END,
                   CASE WHEN %(state)s = 'rendered' THEN now() END
              FROM generate_series(1, %(count)s)""", {"org": org, "shipment": shipment, "state": state,
                                                     "count": BACKLOG})


def one_event_of(conn, org):
    """A status change of a new shipment of `org`, through the trigger; returns the shipment's id."""
    shipment = make_shipment(conn, org, status="draft")
    with conn.cursor() as cur:
        cur.execute("UPDATE shipments SET status = 'validated' WHERE id = %s", (shipment,))
    return shipment


def attempts_before(conn, endpoint):
    """The one attempt to `endpoint` and how many attempts to other endpoints were started before it."""
    with conn.cursor() as cur:
        cur.execute("""
            SELECT a.state, a.status_code, ev.organization_id, ev.rendered_at,
                   (SELECT count(*) FROM webhook_attempts b WHERE b.id < a.id) AS before,
                   (SELECT count(*) FROM events e
                     WHERE e.organization_id <> ev.organization_id AND e.rendered_at < ev.rendered_at) AS rendered_before
              FROM webhook_attempts a JOIN events ev ON ev.id = a.event_id
             WHERE a.endpoint_id = %s""", (endpoint,))
        return cur.fetchall()


def test_a_render_backlog_of_one_organization_does_not_hold_up_another(conn, receiver, settings):
    busy, other = make_org(conn, "busy"), make_org(conn, "other")
    add_endpoint(conn, busy, receiver.url("/ok?busy"))
    endpoint = add_endpoint(conn, other, receiver.url("/ok?other"))
    backlog_of(conn, busy)
    shipment = one_event_of(conn, other)  # written after the whole backlog: the newest event

    run_pass(settings, seconds=1)

    # Rendered in the first batch (no event of the backlog was rendered before it) and sent in the first claim:
    # at most one claim's worth of the backlog's attempts (the endpoint's cap) started before it.
    attempts = attempts_before(conn, endpoint["id"])
    assert len(attempts) == 1, "the other organization's event was not sent in the pass"
    (attempt,) = attempts
    assert attempt["rendered_before"] == 0
    assert attempt["before"] <= settings.per_endpoint
    assert (attempt["state"], attempt["status_code"], attempt["organization_id"]) == ("succeeded", 200, other)
    (request,) = [r for r in receiver.requests if r["path"] == "/ok?other"]
    assert json.loads(request["body"])["data"]["object"]["id"] == f"shp_{shipment}"
    with conn.cursor() as cur:
        cur.execute("SELECT count(*) FROM events WHERE state = 'pending'")
        assert cur.fetchone()["count"] > 0  # the pass ended with most of the backlog still waiting


def test_a_delivery_backlog_of_one_organization_does_not_hold_up_another(conn, receiver, database_url, ca_bundle):
    # As many workers as one endpoint may have in flight: the backlog alone could take every worker.
    settings = delivery_settings(DATABASE_URL=database_url, WEBHOOK_ALLOWED_NETWORKS=["127.0.0.1/32"],
                                 WEBHOOK_CA_BUNDLE=ca_bundle, WEBHOOK_WORKERS=4, WEBHOOK_PER_ENDPOINT=4)
    busy, other = make_org(conn, "busy"), make_org(conn, "other")
    busy_endpoint = add_endpoint(conn, busy, receiver.url("/ok?busy"))
    endpoint = add_endpoint(conn, other, receiver.url("/ok?other"))
    backlog_of(conn, busy, state="rendered")
    with conn.cursor() as cur:  # all due before the other organization's event even happens
        cur.execute("""INSERT INTO webhook_deliveries (event_id, endpoint_id, next_attempt_at)
                       SELECT id, %s, now() - interval '1 hour' FROM events""", (busy_endpoint["id"],))
    shipment = one_event_of(conn, other)

    run_pass(settings, seconds=1)

    attempts = attempts_before(conn, endpoint["id"])
    assert len(attempts) == 1, "the other organization's event was not sent in the pass"
    (attempt,) = attempts
    assert attempt["before"] < settings.workers  # in the first claim
    assert (attempt["state"], attempt["status_code"], attempt["organization_id"]) == ("succeeded", 200, other)
    (request,) = [r for r in receiver.requests if r["path"] == "/ok?other"]
    assert json.loads(request["body"])["data"]["object"]["id"] == f"shp_{shipment}"
    with conn.cursor() as cur:
        cur.execute("SELECT count(*) FROM webhook_deliveries WHERE state = 'pending'")
        assert cur.fetchone()["count"] > 0


def produced(node):
    """The rows each node of an EXPLAIN (ANALYZE, FORMAT JSON) plan produced, in all its loops."""
    yield node["Actual Rows"] * node["Actual Loops"]
    for child in node.get("Plans", ()):
        yield from produced(child)


def test_a_render_batch_reads_a_few_batches_of_a_backlog_not_all_of_it(conn):
    busy = make_org(conn, "busy")
    backlog_of(conn, busy)
    others = [make_org(conn, slug) for slug in ("a", "b", "c")]
    for org in others:
        one_event_of(conn, org)
    with conn.cursor() as cur:
        cur.execute("ANALYZE events")
        cur.execute("BEGIN")
        cur.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + events._CLAIM_UNRENDERED_SQL,
                    {"limit": RENDER_BATCH, "ids": None})
        (plan,) = cur.fetchone()["QUERY PLAN"]
        cur.execute("ROLLBACK")
    # Each waiting organization offers at most four batches, whatever its backlog: no node of the plan made
    # more rows than that and the others' three events (EXPLAIN's rows per loop are rounded averages).
    assert max(produced(plan["Plan"])) < 5 * RENDER_BATCH
    assert plan["Plan"]["Actual Rows"] == RENDER_BATCH
    # The first turn of each organization, oldest first, then the backlog's second.
    claimed = events.claim_unrendered(conn, RENDER_BATCH)
    assert [event.organization_id for event in claimed[:5]] == [busy, *others, busy]
    assert [event.organization_id for event in claimed].count(busy) == RENDER_BATCH - len(others)
