"""What the database's rules cost the application's writes: one schema.sql against another (not a test).

    .venv/bin/python bench/write_cost.py                    # this checkout's schema.sql vs HEAD~1's
    .venv/bin/python bench/write_cost.py --before 474e012   # vs the schema.sql of any commit

Creates two scratch databases on $DATABASE_URL's server (else the embedded one), applies each
schema, and runs the same application-like workload on both, alternating rounds: per shipment an
insert, two containers, three checks, a packing list with a pallet and five lines (one statement
each, each its own transaction, as an application saving a form does), then a status change and a
container update. Prints the median seconds per round for each schema and the ratio.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg2

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from models import db  # noqa: E402


def workload(conn, organization_id, shipments):
    with conn.cursor() as cur:
        for number in range(shipments):
            cur.execute("INSERT INTO shipments (organization_id, consignor) VALUES (%s, 'Bench') RETURNING id",
                        (organization_id,))
            shipment = cur.fetchone()[0]
            containers = []
            for _ in range(2):
                cur.execute("INSERT INTO containers (organization_id, shipment_id, eta) VALUES (%s, %s, now()) "
                            "RETURNING id", (organization_id, shipment))
                containers.append(cur.fetchone()[0])
            for key in range(3):
                cur.execute("INSERT INTO checks (organization_id, shipment_id, key, category, title) "
                            "VALUES (%s, %s, %s, 'c', 't')", (organization_id, shipment, f"k{key}"))
            cur.execute("INSERT INTO packing_lists (organization_id, shipment_id) VALUES (%s, %s) RETURNING id",
                        (organization_id, shipment))
            packing_list = cur.fetchone()[0]
            cur.execute("INSERT INTO pallets (shipment_id, packing_list_id, pallet_number) VALUES (%s, %s, 'P') "
                        "RETURNING id", (shipment, packing_list))
            pallet = cur.fetchone()[0]
            for line in range(1, 6):
                cur.execute("INSERT INTO packing_lines (pallet_id, shipment_id, line_index, produce_name, box_count)"
                            " VALUES (%s, %s, %s, 'Kiwi', 10)", (pallet, shipment, line))
            cur.execute("UPDATE shipments SET status = 'validated' WHERE id = %s", (shipment,))
            cur.execute("UPDATE containers SET seal_number = %s WHERE id = %s", (f"S{number}", containers[0]))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", default="HEAD~1", help="commit whose schema.sql is the baseline")
    parser.add_argument("--shipments", type=int, default=200, help="shipments per round")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    server = os.environ.get("DATABASE_URL") or db.embedded_database_url()
    schemas = {"before": subprocess.run(["git", "show", f"{args.before}:schema.sql"], cwd=ROOT, check=True,
                                        capture_output=True, text=True).stdout,
               "after": (ROOT / "schema.sql").read_text()}
    admin = psycopg2.connect(urlunsplit(urlsplit(server)._replace(path="/postgres")))
    admin.autocommit = True
    connections = {}
    for name, text in schemas.items():
        database = f"bench_write_cost_{name}_{os.getpid()}"
        with admin.cursor() as cur:
            cur.execute(f'CREATE DATABASE "{database}"')
        conn = psycopg2.connect(urlunsplit(urlsplit(server)._replace(path="/" + database)))
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute("SET client_min_messages = warning")
            cur.execute(text)
            cur.execute("INSERT INTO organizations (name, slug) VALUES ('Bench', 'bench') RETURNING id")
            connections[name] = (database, conn, cur.fetchone()[0])
    timings = {name: [] for name in schemas}
    try:
        for _ in range(args.rounds):
            for name, (_database, conn, organization_id) in connections.items():
                started = time.perf_counter()
                workload(conn, organization_id, args.shipments)
                timings[name].append(time.perf_counter() - started)
    finally:
        for database, conn, _org in connections.values():
            conn.close()
            with admin.cursor() as cur:
                cur.execute(f'DROP DATABASE "{database}"')
        admin.close()
    statements = args.shipments * 16
    for name, values in timings.items():
        median = statistics.median(values)
        print(f"{name:6} ({'schema.sql of ' + args.before if name == 'before' else 'this checkout'}): "
              f"median {median:.2f} s per round of {statements} statements "
              f"({median / statements * 1000:.3f} ms each); rounds {', '.join(f'{v:.2f}' for v in values)}")
    print(f"after / before: {statistics.median(timings['after']) / statistics.median(timings['before']):.2f}")


if __name__ == "__main__":
    main()
