"""What a read writes, and what a refused request costs the database once its window is spent (not a test).

    .venv/bin/python bench/reads_write_nothing.py --shipments 20000 --code /tmp/before   # seed both, then measure
    .venv/bin/python bench/reads_write_nothing.py --code /tmp/before --rounds 3         # on the databases seeded before

On a bench database seeded with `--shipments` demo shipments (benchkit.seed; with `--code DIR` a second one,
seeded by that checkout itself: benchkit.code_database), each checkout under gunicorn with 2 workers and the
service's gunicorn.conf.py (its threaded worker, the access log to /dev/null), one at a time, the checkouts
taking turns in each round:

- reads: `--reads` GET /shipments?limit=25 of one token far below its limits (FAR_BELOW), from `--clients`
  threads, once a gunicorn before has stored the page's renderings. Row writes: inserts, updates and
  deletes in every table (pg_stat_user_tables), counted from before gunicorn starts until it has stopped.
  The target: at most 1 row write per 32 reads.
- refusals: a new token of a limit of `--limit` requests per hour spends it one request at a time (200s,
  then a 429), then sends `--refused` more list requests from `--clients` threads, every one a 429.
  Transactions of the database (pg_stat_database's xact_commit + xact_rollback, read from another database
  so that reading them is not counted) over that gunicorn, less those over one whose token only spends
  its window: what the refused requests cost, without the workers' start and the spending. The target: at
  most 1 per 10.

A count is read only while no gunicorn runs (`counted`): an idle backend holds what it did until its next
statement or its end, so a count read while gunicorn's backends live misses some of what came before.

Beside them, the CPU (from /proc) of the database's backends serving the checkout and of gunicorn (master
and workers) per request. Prints each round, then the medians and the targets. Only 2xx answers count (429s
where refusals are measured): any other answer, or a connection error, is printed in capitals, the figures
it enters are INVALID, and the run exits with status 1.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg2
import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchkit import ROOT, acme_token, bench_url, code_database, run, seed, start_gunicorn  # noqa: E402
from floor import backend_cpu, gunicorn_cpu  # noqa: E402

DATABASE = "shiptrack_reads_bench"
# Far below: 2,000 reads are 2 % of the token's window (tests/api/test_reads_write_nothing.py's limits).
FAR_BELOW = {"window_seconds": 300, "per_token": 100_000, "per_ip": 100_000, "anonymous_per_ip": 100_000}
# The refusals' window: an hour, begun at least SPENT_MARGIN seconds before its end (`refusals` waits for the
# next one otherwise), so that the window stays spent while they are sent.
SPENT_WINDOW = 3600
SPENT_MARGIN = 120
# Seconds a count must stay the same, once gunicorn's backends have ended, to be taken as complete (each reports
# its counts as it ends); the longest wait for it.
QUIET, SETTLE_AT_MOST = 2.0, 60.0
WRITES_SQL = "SELECT coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0)::bigint FROM pg_stat_user_tables"
TRANSACTIONS_SQL = "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = %s"


def connect(url, database=None):
    """An autocommit connection to `url` (or to `database` on its server) reading statistics as they are now."""
    if database:
        url = urlunsplit(urlsplit(url)._replace(path="/" + database))
    conn = psycopg2.connect(url)
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute("SET stats_fetch_consistency = none")
    return conn


def value(conn, sql, *params):
    """The one value `sql` answers."""
    with conn.cursor() as cur:
        cur.execute(sql, params)
        return cur.fetchone()[0]


def settled(read, quiet):
    """`read()` once it has stayed the same for `quiet` seconds; None when it kept changing (the run does not count)."""
    last, since, started = read(), time.monotonic(), time.monotonic()
    while time.monotonic() - since < quiet:
        if time.monotonic() - started > SETTLE_AT_MOST:
            return None
        time.sleep(0.25)
        now = read()
        if now != last:
            last, since = now, time.monotonic()
    return last


def load(url, headers, count, clients):
    """The status of each of `count` GETs of `url` from `clients` threads (None: a connection error)."""
    def get(_number):
        try:
            return requests.get(url, headers=headers, timeout=30).status_code
        except requests.RequestException:
            return None
    with ThreadPoolExecutor(clients) as pool:
        return list(pool.map(get, range(count)))


def serve(checkout, env, limits, port):
    """gunicorn -w 2 of `checkout` with RATE_LIMITS `limits`; probed on /docs, which no limit counts."""
    return start_gunicorn({**env, "SHIPTRACK_RATE_LIMITS": json.dumps(limits)}, port, workers=2, cwd=checkout,
                          probe="/docs", stdout=subprocess.DEVNULL)


def stop(master):
    """Stop a gunicorn and wait for it (its workers' connections close as they exit)."""
    master.terminate()
    master.wait()


def cpu_ms(admin, database, master, measured):
    """(PostgreSQL backends', gunicorn's) CPU milliseconds per request of `measured()`, which returns the requests."""
    backends, gunicorn = backend_cpu(admin, [database]), gunicorn_cpu(master)
    count = measured()
    used = sum(seconds - backends.get(pid, 0.0) for pid, seconds in backend_cpu(admin, [database]).items())
    return used * 1000 / count, (gunicorn_cpu(master) - gunicorn) * 1000 / count


def started(master):
    """`master` once its workers have booted (their CPU stays still), so that their start is not measured."""
    last = gunicorn_cpu(master)
    for _ in range(60):
        time.sleep(0.5)
        now = gunicorn_cpu(master)
        if now - last < 0.02:
            return master
        last = now
    return master


def counted(checkout, env, limits, port, read, work):
    """(how much `read()` grew, what `work(master, url)` returned) over a gunicorn of its own, from before it
    starts until it has stopped and the count has settled (None: it did not).

    Only a backend that has ended is sure to have reported its counts (an idle one holds them until its next
    statement), so a count is read only while no gunicorn runs: the new workers are counted from their start.
    """
    before = settled(read, QUIET)
    master = started(serve(checkout, env, limits, port))
    try:
        figures = work(master, f"http://127.0.0.1:{port}/shipments?limit=25")
    finally:
        stop(master)
    after = settled(read, QUIET)
    return (None if before is None or after is None else after - before), figures


def answered(statuses, wrong, expected=None):
    """How many `statuses` there are; each not `expected` (any 2xx by default) is added to `wrong`."""
    wrong.extend(status for status in statuses
                 if (status != expected if expected else not (status and 200 <= status < 300)))
    return len(statuses)


def reads(args, checkout, env, headers, admin, port):
    """{figure: value} of `--reads` list reads far below the limits, counted from gunicorn's start; 'wrong'
    counts answers not 2xx."""
    database = urlsplit(env["DATABASE_URL"]).path.lstrip("/")
    stats, wrong = connect(env["DATABASE_URL"]), []

    def warm(master, url):   # the page's stored renderings, on a gunicorn before
        answered(load(url, headers, 50, args.clients), wrong)

    def measured(master, url):
        return cpu_ms(admin, database, master, lambda: answered(load(url, headers, args.reads, args.clients), wrong))
    try:
        counted(checkout, env, FAR_BELOW, port, lambda: value(stats, WRITES_SQL), warm)
        writes, (postgres_ms, gunicorn_ms) = counted(checkout, env, FAR_BELOW, port, lambda: value(stats, WRITES_SQL),
                                                     measured)
    finally:
        stats.close()
    return {"writes": writes, "postgres_ms": postgres_ms, "gunicorn_ms": gunicorn_ms,
            "wrong": len(wrong) + (writes is None)}


def refusals(args, checkout, env, admin, port):
    """{figure: value} of `--refused` list requests of a token whose window is spent: the transactions of a
    gunicorn whose token spends its window and then sends them, less those of one whose token only spends it
    ('with' and 'without' them); 'wrong' counts answers not 429 (and a spending not ended by one)."""
    database = urlsplit(env["DATABASE_URL"]).path.lstrip("/")
    left = SPENT_WINDOW - time.time() % SPENT_WINDOW
    if left < SPENT_MARGIN:
        print(f"waiting {left:.0f} s for the next window of the refusals", flush=True)
        time.sleep(left + 1)
    limits = {"window_seconds": SPENT_WINDOW, "per_token": args.limit, "per_ip": 10_000_000,
              "anonymous_per_ip": 10_000_000}
    wrong, admitted = [], []

    def spend(url, headers):   # one request at a time, until the first 429
        spending = []
        while len(spending) < 3 * args.limit and (not spending or spending[-1] == 200):
            spending.append(load(url, headers, 1, 1)[0])
        answered(spending[:-1], wrong, 200)
        answered(spending[-1:], wrong, 429)
        admitted.append(spending.count(200))

    # A token for each gunicorn, made before either starts (a window not spent yet; its making not counted).
    headers = [{"Authorization": f"Bearer {acme_token(env, name, cwd=checkout)}"} for name in ("spent", "refused")]

    def only_spent(master, url):
        spend(url, headers[0])

    def measured(master, url):
        spend(url, headers[1])
        return cpu_ms(admin, database, master,
                      lambda: answered(load(url, headers[1], args.refused, args.clients), wrong, 429))
    read = lambda: value(admin, TRANSACTIONS_SQL, database)  # noqa: E731
    without, _ = counted(checkout, env, limits, port, read, only_spent)
    with_them, (postgres_ms, gunicorn_ms) = counted(checkout, env, limits, port, read, measured)
    transactions = None if without is None or with_them is None else with_them - without
    return {"transactions": transactions, "with": with_them, "without": without, "postgres_ms": postgres_ms,
            "gunicorn_ms": gunicorn_ms, "admitted": admitted, "wrong": len(wrong) + (transactions is None)}


def report(args, results):
    """The medians and the targets; False when any figure is INVALID."""
    valid = True
    for name, rounds in results.items():
        read, refused = [each for each, _ in rounds], [each for _, each in rounds]
        if any(each["wrong"] for each in read + refused):
            valid = False
            print(f"{name.upper()}: {sum(each['wrong'] for each in read)} READS AND "
                  f"{sum(each['wrong'] for each in refused)} REFUSALS WERE NOT ANSWERED AS THEY SHOULD, OR THE "
                  f"STATISTICS DID NOT SETTLE: ITS FIGURES ARE INVALID", flush=True)
            continue
        writes = statistics.median(each["writes"] for each in read) / args.reads
        transactions = statistics.median(each["transactions"] for each in refused) / args.refused
        print(f"median {name}: {writes:.4f} row writes per read (1 per {1 / writes if writes else float('inf'):.1f}; "
              f"target at most 1 per 32: {'met' if writes <= 1 / 32 else 'NOT MET'}), PostgreSQL "
              f"{statistics.median(each['postgres_ms'] for each in read):.2f} ms and gunicorn "
              f"{statistics.median(each['gunicorn_ms'] for each in read):.2f} ms of CPU per read", flush=True)
        print(f"median {name}: {transactions:.4f} transactions per refused request (target at most 0.1: "
              f"{'met' if transactions <= 0.1 else 'NOT MET'}), PostgreSQL "
              f"{statistics.median(each['postgres_ms'] for each in refused):.2f} ms and gunicorn "
              f"{statistics.median(each['gunicorn_ms'] for each in refused):.2f} ms of CPU per refused", flush=True)
    return valid


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--reads", type=int, default=2000)
    parser.add_argument("--refused", type=int, default=300)
    parser.add_argument("--limit", type=int, default=20, help="the refused token's requests per window")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--code", help="another checkout to measure beside this one (the code before a change)")
    parser.add_argument("--database", default=DATABASE)
    parser.add_argument("--shipments", type=int, help="seed --database (and --code's) with this many first")
    parser.add_argument("--port", type=int, default=18811, help="this checkout's port; --code's is the next one")
    args = parser.parse_args()

    url, server = bench_url(args.database)
    env = {**os.environ, "DATABASE_URL": url}
    if args.shipments:
        seed(server, env, args.shipments, args.database)
    run("db", "init", env=env)
    checkouts = {"this checkout": (ROOT, env, args.port)}
    if args.code:
        code = Path(args.code)
        code_env = {**env, "DATABASE_URL": code_database(server, env, args.database, code, args.shipments)}
        checkouts[args.code] = (code, code_env, args.port + 1)
    tokens = {name: {"Authorization": f"Bearer {acme_token(each_env, 'reads', cwd=checkout)}"}
              for name, (checkout, each_env, _port) in checkouts.items()}
    admin = connect(server, "postgres")
    results = {name: [] for name in checkouts}
    try:
        for round_number in range(args.rounds):
            for name, (checkout, each_env, port) in checkouts.items():
                read = reads(args, checkout, each_env, tokens[name], admin, port)
                refused = refusals(args, checkout, each_env, admin, port)
                results[name].append((read, refused))
                print(f"round {round_number + 1}: {name}: {read['writes']} row writes in {args.reads} reads, "
                      f"PostgreSQL {read['postgres_ms']:.2f} ms and gunicorn {read['gunicorn_ms']:.2f} ms of CPU each; "
                      f"{refused['transactions']} transactions in {args.refused} refused ({refused['with']} with "
                      f"them, {refused['without']} without; {refused['admitted']} admitted first), PostgreSQL "
                      f"{refused['postgres_ms']:.2f} ms and gunicorn {refused['gunicorn_ms']:.2f} ms of CPU each",
                      flush=True)
                if read["wrong"] or refused["wrong"]:
                    print(f"round {round_number + 1}: {name.upper()} MET {read['wrong']} READS NOT 2XX AND "
                          f"{refused['wrong']} REFUSALS NOT 429 (OR STATISTICS THAT DID NOT SETTLE): THIS RUN "
                          f"DOES NOT COUNT", flush=True)
    finally:
        admin.close()
    sys.exit(0 if report(args, results) else 1)


if __name__ == "__main__":
    main()
