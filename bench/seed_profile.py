"""Where a demo seed's time goes: Python generation, COPY per table, other statements, trigger functions.

    .venv/bin/python bench/seed_profile.py --shipments 20000
    .venv/bin/python bench/seed_profile.py --shipments 20000 --code /tmp/seed_before   # another checkout's demo/
    .venv/bin/python bench/seed_profile.py --shipments 20000 --no-secondary-indexes    # index upkeep, by difference
    .venv/bin/python bench/seed_profile.py --shipments 20000 --lean    # every shipment lean, as most of a million
    .venv/bin/python bench/seed_profile.py --shipments 20000 --lean --no-foreign-keys  # their checks, by difference

Recreates a scratch database (default shiptrack_seed_profile) on $DATABASE_URL's server, applies
that checkout's schema, and seeds acme in one process (--workers 1, pinned --now) so every
statement is timed where it runs. The database has track_functions = 'all': PostgreSQL's own
per-function timings (pg_stat_user_functions) split the statements' time between the trigger
functions. With --no-secondary-indexes every index but primary keys and unique constraints is
dropped first; the difference in COPY time against a normal run is the index upkeep (`--keep-index NAME`
keeps one, e.g. those the triggers read). With
--no-foreign-keys every foreign key of the seeded tables is dropped first (their checks, by difference).
"""
import argparse
import os
import sys
import tempfile
import time
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg2

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.proc_cpu import cpu_seconds  # noqa: E402  (imports nothing of the project: --code still decides)

# Indexes that are neither primary keys nor unique, of the tables the seed fills.
SECONDARY_INDEXES = """SELECT i.indexrelid::regclass::text AS name FROM pg_index i
  JOIN pg_class t ON t.oid = i.indrelid
 WHERE t.relname = ANY (%(tables)s) AND NOT i.indisprimary AND NOT i.indisunique
   AND t.relnamespace = current_schema()::regnamespace"""
# The foreign keys of the seeded tables (both ways: those they hold and those pointing at them).
FOREIGN_KEYS = """SELECT c.conrelid::regclass::text AS table_name, quote_ident(c.conname) AS name FROM pg_constraint c
  JOIN pg_class t ON t.oid = c.conrelid
 WHERE c.contype = 'f' AND t.relnamespace = current_schema()::regnamespace
   AND (t.relname = ANY (%(tables)s) OR c.confrelid::regclass::text = ANY (%(tables)s))"""
# PostgreSQL's timing of every PL/pgSQL and SQL function the seed ran (ms, including and excluding callees).
FUNCTION_TIMES = """SELECT funcname, calls, total_time, self_time FROM pg_stat_user_functions
 ORDER BY self_time DESC"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shipments", type=int, default=20000)
    parser.add_argument("--code", default=str(ROOT), help="checkout whose schema.sql, demo/ and models/ run")
    parser.add_argument("--database", default="shiptrack_seed_profile")
    parser.add_argument("--no-secondary-indexes", action="store_true")
    parser.add_argument("--keep-index", action="append", default=[], metavar="NAME",
                        help="with --no-secondary-indexes: keep this one (repeatable)")
    parser.add_argument("--no-foreign-keys", action="store_true")
    parser.add_argument("--lean", action="store_true",
                        help="every shipment as lean as those past the 5,000th (what a million mostly is)")
    args = parser.parse_args()
    sys.path.insert(0, args.code)
    os.chdir(args.code)
    from models import db, migrations
    from demo import batches, bulk, seed
    if args.lean:
        batches.FULL_DETAIL_LIMIT = 0

    server = os.environ.get("DATABASE_URL") or db.embedded_database_url()
    url = urlunsplit(urlsplit(server)._replace(path="/" + args.database))
    _recreate(server, args.database)
    conn = db.connect(url)
    migrations.init(conn)
    conn.commit()
    with conn.cursor() as cur:
        cur.execute(f'ALTER DATABASE "{args.database}" SET track_functions = \'all\'')
        if args.no_secondary_indexes:
            cur.execute(SECONDARY_INDEXES, {"tables": [t.name for t in bulk.TABLES]})
            for row in cur.fetchall():
                if row["name"] not in args.keep_index:
                    cur.execute(f"DROP INDEX {row['name']}")
        if args.no_foreign_keys:
            cur.execute(FOREIGN_KEYS, {"tables": [t.name for t in bulk.TABLES]})
            for row in cur.fetchall():
                cur.execute(f"ALTER TABLE {row['table_name']} DROP CONSTRAINT {row['name']}")
    conn.commit()
    conn.close()

    timings, backend_cpu = defaultdict(float), {}
    _instrument(db, timings, backend_cpu)
    options = seed.Options(args.shipments, 0, 1, False, 1, datetime(2026, 3, 1, 12, tzinfo=timezone.utc))
    load = os.getloadavg()
    started, cpu = time.perf_counter(), time.process_time()
    with tempfile.TemporaryDirectory() as storage:
        seed.seed(url, storage, options, echo=lambda line: None)
    total, cpu = time.perf_counter() - started, (time.process_time() - cpu, sum(backend_cpu.values()))
    time.sleep(1.5)  # backends flush their function statistics when they end
    functions = _function_times(url)
    _recreate(server, args.database, create=False)
    _report(args, total, cpu, timings, functions, load)


def _recreate(server, database, create=True):
    admin = psycopg2.connect(urlunsplit(urlsplit(server)._replace(path="/postgres")))
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        if create:
            cur.execute(f'CREATE DATABASE "{database}"')
    admin.close()


def _instrument(db, timings, backend_cpu):
    """Time every statement, COPY and commit of the seed's connections, keyed by what they are; note
    each connection's server process's CPU time at every commit."""
    cursor, connection = db.Cursor, db.Connection
    plain_execute, plain_copy, plain_commit = cursor.execute, cursor.copy_expert, connection.commit

    def execute(self, query, vars=None):
        started = time.perf_counter()
        try:
            return plain_execute(self, query, vars)
        finally:
            timings["SQL " + " ".join(str(query).split()[:3])[:60]] += time.perf_counter() - started

    def copy_expert(self, query, file, *rest):
        started = time.perf_counter()
        try:
            return plain_copy(self, query, file, *rest)
        finally:
            timings["COPY " + query.split()[1].strip('"')] += time.perf_counter() - started

    def commit(self):
        started = time.perf_counter()
        try:
            return plain_commit(self)
        finally:
            timings["COMMIT"] += time.perf_counter() - started
            backend_cpu[self.get_backend_pid()] = cpu_seconds(self.get_backend_pid()) or 0.0

    cursor.execute, cursor.copy_expert, connection.commit = execute, copy_expert, commit


def _function_times(url):
    conn = psycopg2.connect(url)
    try:
        with conn.cursor() as cur:
            cur.execute(FUNCTION_TIMES)
            return cur.fetchall()
    finally:
        conn.close()


def _report(args, total, cpu, timings, functions, load):
    database = sum(timings.values())
    print(f"{args.shipments} shipments, code {args.code}"
          + (", no secondary indexes" if args.no_secondary_indexes else "")
          + (", no foreign keys" if args.no_foreign_keys else "") + (", all lean" if args.lean else "")
          + f"; load average at start {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    print(f"total {total:7.1f} s; CPU time: Python {cpu[0]:.1f} s, its PostgreSQL server process {cpu[1]:.1f} s")
    print(f"  Python (generation, formatting, files) {total - database:7.1f} s")
    print(f"  waiting on PostgreSQL                   {database:7.1f} s")
    for key, seconds in sorted(timings.items(), key=lambda item: -item[1]):
        if seconds >= 0.05:
            print(f"    {key:<40} {seconds:7.2f} s")
    print("trigger and helper functions (PostgreSQL's timing; self = excluding the functions they call):")
    print(f"    {'function':<40} {'calls':>9} {'total s':>8} {'self s':>8}")
    for name, calls, total_ms, self_ms in functions:
        if total_ms >= 50:
            print(f"    {name:<40} {calls:>9} {total_ms / 1000:8.2f} {self_ms / 1000:8.2f}")


if __name__ == "__main__":
    main()
