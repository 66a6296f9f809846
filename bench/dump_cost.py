"""Rendering with the compiled dumper (rendering/compiled.py) against marshmallow's own `Schema.dump` (not a test).

    .venv/bin/python bench/dump_cost.py --database shiptrack_bench --rounds 300

Every case runs with this code's `present` (the compiled dumper) and with `present` dumping through one
marshmallow schema instance per class, alternating round by round; the bytes of both must be equal.
Medians in milliseconds; compare figures from one run.

Dumps: acme's newest 100 shipments rendered as a miss is (`present` and `dumps` of each, as
render_missing does), the same with their rows read first (what a page of misses costs in all), a
webhook body around one shipment and around one alert (delivery/outbox.py's envelope), and what the
views that dump on every request dump: 100 alerts, 100 checks, the documents and the timeline of the
shipment with the most tracking events.
Requests: whole GETs of those views (and of a timeline of 13 events, the demo's usual) through the
Flask test client, in this process; gunicorn and the network would add the same to both.
"""
import argparse
import functools
import logging
import os
import statistics
import sys
import time
from pathlib import Path

from benchkit import acme_id, acme_token, bench_url

# bench/api.py would shadow the package api/ (a namespace package, without __init__.py) that app.py imports.
sys.path.remove(str(Path(__file__).resolve().parent))

import api.responses  # noqa: E402
from app import create_app  # noqa: E402
from config import DEFAULTS  # noqa: E402
from delivery.outbox import envelope  # noqa: E402
from models import alerts, checks, db, documents, shipments, timeline  # noqa: E402
from rendering import present as presenting  # noqa: E402
from rendering import versions  # noqa: E402
from rendering.ids import format_id  # noqa: E402
from rendering.schemas.alerts import MonitoringAlertSchema  # noqa: E402
from rendering.schemas.checks import CHECK_STATUSES, ShipmentCheckSchema  # noqa: E402
from rendering.schemas.documents import DocumentSchema  # noqa: E402
from rendering.schemas.shipments import ShipmentSchema  # noqa: E402
from rendering.schemas.timeline import TimelineSchema  # noqa: E402

# acme's shipments by their number of tracking events: the most, then one with 13 (the demo's usual).
BY_EVENTS_SQL = """
SELECT e.shipment_id, count(*) AS events FROM tracking_events e JOIN shipments s ON s.id = e.shipment_id
 WHERE s.organization_id = %s GROUP BY e.shipment_id ORDER BY count(*) DESC, e.shipment_id
"""


@functools.cache
def _schema(schema_class):
    return schema_class()


def marshmallow_present(kind, schema_class, obj, version):
    """rendering.present.present, dumping with marshmallow's Schema.dump of one instance per class."""
    return versions.shape(kind, _schema(schema_class).dump(obj), version)


VARIANTS = {"compiled": presenting.present, "marshmallow": marshmallow_present}


def compare(cases, rounds):
    """Time each case (a function of a `present`) with both variants, alternating; print the medians."""
    for name, case in cases.items():
        made = {variant: case(present) for variant, present in VARIANTS.items()}
        assert made["compiled"] == made["marshmallow"], f"{name}: the variants' bytes differ"
        timings = {variant: [] for variant in VARIANTS}
        for _ in range(rounds):
            for variant, present in VARIANTS.items():
                started = time.perf_counter()
                case(present)
                timings[variant].append((time.perf_counter() - started) * 1000)
        compiled, plain = (statistics.median(timings[variant]) for variant in VARIANTS)
        print(f"{name:42} compiled {compiled:7.3f} ms, marshmallow {plain:7.3f} ms (+{plain - compiled:.3f} ms, "
              f"{plain / compiled:4.2f} times)", flush=True)


def dumps_cases(conn, organization_id, busiest):
    """{name: function of a `present`} rendering what the views and the webhooks render."""
    version = versions.LATEST
    page = shipments.list_shipments(conn, organization_id, 100)
    ids = [shipment["id"] for shipment in page]
    alert_page = alerts.list_alerts(conn, organization_id, 100)
    check_page = checks.list_checks(conn, organization_id, 100, CHECK_STATUSES)
    journey = timeline.get_timeline(conn, organization_id, busiest)
    shipment_documents = documents.list_shipment_documents(conn, organization_id, busiest)

    def render(present, rows):
        return [presenting.dumps(present("shipment", ShipmentSchema, row, version)) for row in rows]

    def listed(present, kind, schema_class, items):
        return presenting.dumps({"object": "list", "data": [present(kind, schema_class, item, version)
                                                             for item in items], "has_more": False})

    def body(present, kind, schema_class, obj):
        data = {"object": present(kind, schema_class, obj, version), "previous_attributes": None}
        return presenting.dumps(envelope(1, "shipment.updated", page[0]["created_at"], version, data))

    return {
        "dump: 100 shipments (a page of misses)": lambda present: render(present, page),
        "dump: the same, their rows read first": lambda present: render(
            present, shipments.list_shipments(conn, organization_id, 100, shipment_ids=ids)),
        "dump: a webhook body (a shipment)": lambda present: body(present, "shipment", ShipmentSchema, page[0]),
        "dump: a webhook body (an alert)": lambda present: body(present, "monitoring_alert", MonitoringAlertSchema,
                                                                alert_page[0]),
        f"dump: {len(alert_page)} alerts": lambda present: listed(present, "monitoring_alert", MonitoringAlertSchema,
                                                                 alert_page),
        f"dump: {len(check_page)} checks": lambda present: listed(present, "shipment_check", ShipmentCheckSchema,
                                                                 check_page),
        f"dump: {len(shipment_documents)} documents": lambda present: listed(present, "document", DocumentSchema,
                                                                            shipment_documents),
        f"dump: a timeline of {len(journey['events'])} events": lambda present: presenting.dumps(
            present("timeline", TimelineSchema, journey, version)),
    }


def request_cases(url, token, counts):
    """{name: function of a `present`} making one GET through the test client with that `present`."""
    limits = {key: value if key == "window_seconds" else 10**9 for key, value in DEFAULTS["RATE_LIMITS"].items()}
    app = create_app({"DATABASE_URL": url, "METRICS_ENABLED": False, "RATE_LIMITS": limits})
    client = app.test_client()
    headers = {"Authorization": f"Bearer {token}"}
    paths = {f"GET a timeline of {events} events": f"/shipments/{format_id('shp', shipment_id)}/timeline"
             for shipment_id, events in counts}
    paths |= {"GET /checks (its defaults)": "/checks", "GET /checks, 100 of any status":
              f"/checks?limit=100&status={','.join(CHECK_STATUSES)}", "GET /alerts (its defaults)": "/alerts",
              "GET /alerts?limit=100": "/alerts?limit=100",
              "GET a shipment's documents": f"/shipments/{format_id('shp', counts[0][0])}/documents"}

    def get(path, present):
        api.responses.present = present  # how listing() and resource() dump
        response = client.get(path, headers=headers)
        assert response.status_code == 200, (path, response.status_code)
        return response.data

    return {name: functools.partial(get, path) for name, path in paths.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database", default="shiptrack_bench", help="a database with the demo data")
    parser.add_argument("--rounds", type=int, default=300)
    args = parser.parse_args()
    url, _server = bench_url(args.database)
    organization_id = acme_id(url)
    token = acme_token({**os.environ, "DATABASE_URL": url}, "dump cost")
    conn = db.connect(url)
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute(BY_EVENTS_SQL, (organization_id,))
        by_events = [(row["shipment_id"], row["events"]) for row in cur.fetchall()]
    counts = [by_events[0], next(pair for pair in by_events if pair[1] == 13)]
    logging.disable(logging.WARNING)
    try:
        compare(dumps_cases(conn, organization_id, counts[0][0]), args.rounds)
        compare(request_cases(url, token, counts), args.rounds)
    finally:
        api.responses.present = presenting.present
        conn.close()


if __name__ == "__main__":
    main()
