"""What WAL-logging the stored renderings costs a store (not a test).

    .venv/bin/python bench/rendering_wal.py --rounds 200

`shipment_renderings` is WAL-logged so that hot standbys have it (docs/scaling.md). On a scratch database of
the configured server (DATABASE_URL, or the embedded one), two copies of its shape, one UNLOGGED (as it was)
and one logged, take turns storing what a page of `--shipments` misses stores: one INSERT ... ON CONFLICT DO
UPDATE of that many renderings of `--bytes` each, as models/shipments.py STORE_RENDERINGS_SQL writes them,
each in its own transaction (autocommit, as the API's), every revision new. Prints the median milliseconds of
each and the WAL bytes per store (pg_current_wal_lsn before and after, the other's stores between excluded).
"""
import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchkit import bench_url, recreate  # noqa: E402

import psycopg2  # noqa: E402

DATABASE = "shiptrack_rendering_wal_bench"
TABLE = """CREATE {kind} TABLE {name} (shipment_id bigint NOT NULL, api_version text NOT NULL, renderer text NOT NULL,
  revision bigint NOT NULL, body text NOT NULL, rendered_at timestamptz NOT NULL DEFAULT now(),
  resource text NOT NULL, PRIMARY KEY (shipment_id, api_version, resource),
  body_md5 text GENERATED ALWAYS AS (md5(body)) STORED)"""
STORE = """INSERT INTO {name} AS r (shipment_id, api_version, resource, renderer, revision, body)
SELECT f.shipment_id, '2026-01-01', 'shipment', 'r', f.revision, f.body
  FROM unnest(%(ids)s::bigint[], %(revisions)s::bigint[], %(bodies)s::text[]) AS f (shipment_id, revision, body)
 ORDER BY f.shipment_id
ON CONFLICT (shipment_id, api_version, resource) DO UPDATE
   SET renderer = EXCLUDED.renderer, revision = EXCLUDED.revision, body = EXCLUDED.body, rendered_at = now()
 WHERE r.revision < EXCLUDED.revision OR r.renderer <> EXCLUDED.renderer"""


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--shipments", type=int, default=100)
    parser.add_argument("--bytes", type=int, default=1800, help="a rendering's size (the demo's are 1.5 to 2 KB)")
    args = parser.parse_args()
    url, server = bench_url(DATABASE)
    recreate(server, DATABASE)
    conn = psycopg2.connect(url)
    conn.autocommit = True
    cur = conn.cursor()
    for kind, name in (("UNLOGGED", "unlogged"), ("", "logged")):
        cur.execute(TABLE.format(kind=kind, name=name))
    ids = list(range(1, args.shipments + 1))
    times, wal = {"unlogged": [], "logged": []}, {"unlogged": [], "logged": []}
    for revision in range(1, args.rounds + 1):
        bodies = [f'{{"id":{each},"revision":{revision},"x":"' + "x" * args.bytes + '"}' for each in ids]
        for name in ("unlogged", "logged") if revision % 2 else ("logged", "unlogged"):
            cur.execute("SELECT pg_current_wal_lsn()")
            before = cur.fetchone()[0]
            started = time.perf_counter()
            cur.execute(STORE.format(name=name), {"ids": ids, "revisions": [revision] * len(ids), "bodies": bodies})
            times[name].append((time.perf_counter() - started) * 1000)
            cur.execute("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %s)", (before,))
            wal[name].append(int(cur.fetchone()[0]))
    for name in ("unlogged", "logged"):
        print(f"{name}: median {statistics.median(times[name]):.2f} ms per store of {args.shipments} renderings, "
              f"{statistics.median(wal[name]) / 1024:.0f} KiB of WAL", flush=True)
    conn.close()
    admin = psycopg2.connect(server)
    admin.autocommit = True
    admin.cursor().execute(f'DROP DATABASE IF EXISTS "{DATABASE}" WITH (FORCE)')
    admin.close()


if __name__ == "__main__":
    main()
