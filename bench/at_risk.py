"""GET /free_time/at_risk through gunicorn, code variants compared in interleaved rounds on one database.

    git worktree add /tmp/at_risk_before <commit>
    .venv/bin/python bench/at_risk.py --database shiptrack_bench \
        --variant before /tmp/at_risk_before --variant after . --rounds 3 --requests 30
    .venv/bin/python bench/at_risk.py --database shiptrack_bench --split    # where this checkout's time goes
    .venv/bin/python bench/at_risk.py --scale 10 --database shiptrack_bench --into shiptrack_at_risk_x10
    .venv/bin/python bench/at_risk.py --database shiptrack_at_risk_x10 --split

Each round of a variant first gives the database that checkout's own definition of the at-risk indexes
(read from its schema.sql; dropped and created again), starts gunicorn (2 workers) from the checkout,
times the first request (a worker that has summarised nothing yet) and then the p50/p95 of `--requests`
more (after 4 warm-up requests). It checks that every variant answers the same bytes (they differ only if a port's midnight passes
between two runs).
`--split` instead times, in this process and with this checkout's code, each part of the request: the
candidate search alone, the whole statement, parsing the facts, the engine, dumping, writing the JSON,
and the kept-summaries path with nothing kept and with everything kept.
`--scale N --into DB` makes DB hold only what the at-risk statement reads (acme's shipments with the
columns it reads, their containers, clock events and arrival notices, the carrier terms) N times over,
new ids, same dates, with this checkout's indexes for them: a stand-in for a demo seed N times larger,
for `--split` only (narrower shipment rows than the real table, so it flatters the row lookups).
Uses $DATABASE_URL's server. Not a test: timings depend on the machine; compare figures from one run.
"""
import argparse
import os
import re
import statistics
import sys
import time
from pathlib import Path

import psycopg2
import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchkit import RAISED_LIMITS, acme_token, bench_url, percentile, start_gunicorn  # noqa: E402

INDEXES = ("tracking_events_discharged_idx", "shipments_free_time_idx")
# The candidate search alone: the function of schema.sql the at-risk statement calls.
CANDIDATES_SQL = "SELECT c.shipment_id FROM at_risk_candidates(%(organization_id)s, %(now)s, %(window_days)s) c"


def index_definitions(checkout):
    """The CREATE INDEX statements of the at-risk indexes in a checkout's schema.sql."""
    schema = (Path(checkout) / "schema.sql").read_text()
    found = [re.search(rf"CREATE INDEX IF NOT EXISTS {name} ON .*?;", schema, re.S) for name in INDEXES]
    return [match.group(0) for match in found]


def give_indexes(url, checkout):
    """Drop the at-risk indexes and create them as `checkout` defines them."""
    conn = psycopg2.connect(url)
    conn.autocommit = True
    with conn.cursor() as cur:
        for name, definition in zip(INDEXES, index_definitions(checkout)):
            cur.execute(f"DROP INDEX IF EXISTS {name}")
            cur.execute(definition)
        cur.execute("ANALYZE tracking_events")
        cur.execute("ANALYZE shipments")
    conn.close()


def one_round(env, checkout, port, headers, count):
    """(first request ms, timings of `count` later requests, body) of one gunicorn run from `checkout`."""
    server = start_gunicorn(env, port, workers=2, cwd=checkout)
    try:
        session = requests.Session()
        url = f"http://127.0.0.1:{port}/free_time/at_risk"
        started = time.perf_counter()
        response = session.get(url, headers=headers)
        first = (time.perf_counter() - started) * 1000
        response.raise_for_status()
        for _ in range(4):
            session.get(url, headers=headers).raise_for_status()
        timings = []
        for _ in range(count):
            started = time.perf_counter()
            response = session.get(url, headers=headers)
            timings.append((time.perf_counter() - started) * 1000)
            response.raise_for_status()
        return first, timings, response.content
    finally:
        server.terminate()
        server.wait()


def split(url, count):
    """Print the median time of each part of the at-risk request (this checkout's code, in process)."""
    # The service's `api` package has no __init__.py, so bench/api.py would shadow it.
    here = Path(__file__).resolve().parent
    sys.path[:] = [str(here.parent)] + [entry for entry in sys.path if Path(entry or ".").resolve() != here]
    from datetime import datetime, timezone

    from api import free_time as free_time_api
    from rendering.schemas.free_time import FreeTimeSummarySchema
    from rendering.present import dumps, present
    from models import db, free_time, free_time_queries

    conn = db.connect(url)
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute("SELECT id FROM organizations WHERE slug = 'acme'")
        organization_id = cur.fetchone()["id"]
    now = datetime.now(timezone.utc)
    params = {"organization_id": organization_id, "now": now, "window_days": free_time.AT_RISK_WINDOW_DAYS}

    def timed(name, work):
        timings, result = [], None
        for _ in range(count):
            started = time.perf_counter()
            result = work()
            timings.append((time.perf_counter() - started) * 1000)
        print(f"{name:52} {statistics.median(timings):8.1f} ms")
        return result

    def candidates():
        with conn.cursor() as cur:
            cur.execute(CANDIDATES_SQL, params)
            return cur.fetchall()

    found = timed("candidate search (statement, planned each time)", candidates)
    rows = timed("whole statement (prepared)",
                 lambda: free_time_queries.at_risk_candidates(conn, organization_id, now))
    facts = timed("parse the facts", lambda: [free_time_queries.parse_facts(row["facts"]) for row in rows])
    entries = timed("engine", lambda: [free_time.at_risk_entry(*each, now) for each in facts])
    listed = [summary for _key, summary in sorted(entry for entry in entries if entry is not None)]
    dumped = timed("dump (compiled from the schema)",
                   lambda: [present("free_time_summary", FreeTimeSummarySchema, each, "2026-10-01")
                            for each in listed])
    timed("write JSON", lambda: [dumps(each) for each in dumped])
    timed("kept summaries: nothing kept (all of the above)",
          lambda: (free_time_api._summaries.clear(), free_time_api.at_risk_bodies(rows, now, "2026-10-01")))
    timed("kept summaries: all kept", lambda: free_time_api.at_risk_bodies(rows, now, "2026-10-01"))
    print(f"{len(found)} candidates, {len(listed)} listed, {sum(len(row['facts']) for row in rows)} bytes of facts")


# What the at-risk statement reads: per table, the columns copied (ids shifted per copy where listed).
SCALED_TABLES = {
    "shipments": ("id bigint PRIMARY KEY, organization_id bigint NOT NULL, reference text, transport_reference text, "
                  "transport_type text, status text NOT NULL, carrier_name text, demurrage_free_days integer, "
                  "detention_free_days integer, free_days_basis text, archived boolean NOT NULL, "
                  "awaiting_approval boolean NOT NULL, owned_elsewhere boolean NOT NULL",
                  ("id",)),
    "containers": ("id bigint PRIMARY KEY, shipment_id bigint NOT NULL, number text", ("id", "shipment_id")),
    "tracking_events": ("id bigint PRIMARY KEY, shipment_id bigint NOT NULL, milestone text NOT NULL, "
                        "actual boolean NOT NULL, occurred_at timestamptz, occurred_at_offset_minutes integer, "
                        "container_number text", ("id", "shipment_id")),
    "arrival_notices": ("id bigint PRIMARY KEY, shipment_id bigint NOT NULL, received_at timestamptz NOT NULL, "
                        "demurrage_free_days integer, detention_free_days integer, free_days_basis text",
                        ("id", "shipment_id")),
    "carrier_terms": ("id bigint PRIMARY KEY, organization_id bigint NOT NULL, carrier text NOT NULL, "
                      "demurrage_free_days integer NOT NULL, detention_free_days integer NOT NULL, "
                      "free_days_basis text NOT NULL", ()),
}
SCALED_INDEXES = ("tracking_events_discharged_idx", "tracking_events_gate_out_idx", "shipments_free_time_idx",
                  "tracking_events_free_time_idx", "arrival_notices_shipment_idx")


def make_scaled(server, source, target, copies):
    """Create `target` holding acme's free-time facts of `source` `copies` times (see the module doc)."""
    import io
    from urllib.parse import urlsplit, urlunsplit

    def connect(database):
        conn = psycopg2.connect(urlunsplit(urlsplit(server)._replace(path="/" + database)))
        conn.autocommit = True
        return conn

    admin = connect("postgres")
    with admin.cursor() as cur:
        cur.execute(f'DROP DATABASE IF EXISTS "{target}" WITH (FORCE)')
        cur.execute(f'CREATE DATABASE "{target}"')
    admin.close()
    src, dst = connect(source), connect(target)
    schema = (Path(__file__).resolve().parent.parent / "schema.sql").read_text()
    with src.cursor() as scur, dst.cursor() as dcur:
        dcur.execute(re.search(r"CREATE OR REPLACE FUNCTION compact_reference.*?\$\$;", schema, re.S).group(0))
        scur.execute("SELECT id FROM organizations WHERE slug = 'acme'")
        acme = scur.fetchone()[0]
        # Copy k of shipment i is shipment i + k * shipment_step, and so on for each table's ids.
        scur.execute("SELECT max(id) + 1 FROM shipments")
        shipment_step = scur.fetchone()[0]
        for table, (columns, shifted) in SCALED_TABLES.items():
            names = ", ".join(column.split()[0] for column in columns.split(", ") if column.split()[0] != "PRIMARY")
            dcur.execute(f"CREATE TABLE {table} ({columns})")
            owner = "organization_id" if "organization_id" in names else "shipment_id"
            where = (f"organization_id = {acme}" if owner == "organization_id"
                     else f"shipment_id IN (SELECT id FROM shipments WHERE organization_id = {acme})")
            if table == "containers":
                where += " AND number IS NOT NULL"
            buffer = io.StringIO()
            scur.copy_expert(f"COPY (SELECT {names} FROM {table} WHERE {where}) TO STDOUT", buffer)
            buffer.seek(0)
            dcur.copy_expert(f"COPY {table} ({names}) FROM STDIN", buffer)
            if shifted:
                dcur.execute(f"SELECT max(id) + 1 FROM {table}")
                step = shipment_step if table == "shipments" else dcur.fetchone()[0] or 1
                values = ", ".join(
                    f"{name} + k * {step if name == 'id' else shipment_step}" if name in shifted else name
                    for name in names.split(", "))
                dcur.execute(f"INSERT INTO {table} ({names}) SELECT {values} FROM {table}, "
                             f"generate_series(1, {copies - 1}) k")
            print(f"{table}: copied", flush=True)
        for name in SCALED_INDEXES:
            dcur.execute(re.search(rf"CREATE INDEX IF NOT EXISTS {name} ON .*?;", schema, re.S).group(0))
        # Stands in for containers_shipment_created_idx (its creation time is not copied).
        dcur.execute("CREATE INDEX containers_shipment_idx ON containers (shipment_id, id)")
        dcur.execute("CREATE TABLE organizations (id bigint PRIMARY KEY, slug text)")
        dcur.execute("INSERT INTO organizations VALUES (%s, 'acme')", (acme,))
        dcur.execute("VACUUM ANALYZE")
    src.close()
    dst.close()


def main():
    """Measure each variant in turn, `--rounds` times, and print medians."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database", default="shiptrack_bench")
    parser.add_argument("--variant", nargs=2, action="append", metavar=("NAME", "CHECKOUT"))
    parser.add_argument("--split", action="store_true", help="time each part of the request in process")
    parser.add_argument("--scale", type=int, help="make --into, holding --database's free-time facts N times")
    parser.add_argument("--into", help="the database --scale makes")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--requests", type=int, default=30)
    parser.add_argument("--port", type=int, default=18775)
    args = parser.parse_args()

    url, server = bench_url(args.database)
    if args.scale:
        return make_scaled(server, args.database, args.into, args.scale)
    if args.split:
        return split(url, args.requests)
    if not args.variant:
        parser.error("give --variant NAME CHECKOUT (one or more) or --split")
    env = {**os.environ, "DATABASE_URL": url, "SHIPTRACK_RATE_LIMITS": RAISED_LIMITS}
    headers = {"Authorization": f"Bearer {acme_token(env, 'bench-at-risk')}"}
    results = {name: {"first": [], "p50": [], "p95": []} for name, _checkout in args.variant}
    bodies = {}
    for round_number in range(args.rounds):
        for name, checkout in args.variant:
            give_indexes(url, checkout)
            first, timings, body = one_round(env, str(Path(checkout).resolve()), args.port, headers, args.requests)
            bodies[name] = body
            result = results[name]
            result["first"].append(first)
            result["p50"].append(statistics.median(timings))
            result["p95"].append(percentile(timings, 0.95))
            print(f"round {round_number + 1} {name:10} first {first:7.1f} ms  p50 {result['p50'][-1]:7.1f} ms  "
                  f"p95 {result['p95'][-1]:7.1f} ms  ({body.count(b'free_time_summary')} summaries, "
                  f"{len(body)} bytes)", flush=True)
        if len(set(bodies.values())) != 1:
            # Only expected when a port's midnight fell between two variants' runs.
            print(f"!!! the variants answered different bodies in round {round_number + 1}")
    print(f"\n{'variant':10} {'first request':>14} {'p50':>8} {'p95':>8}   (medians of {args.rounds} rounds)")
    for name, result in results.items():
        print(f"{name:10} {statistics.median(result['first']):11.1f} ms {statistics.median(result['p50']):5.1f} ms "
              f"{statistics.median(result['p95']):5.1f} ms")


if __name__ == "__main__":
    main()
