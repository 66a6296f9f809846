"""Reads from a hot standby: what list reads cost the primary, and how soon reads answer once it stops (not a test).

    .venv/bin/python bench/standby.py --shipments 20000 --rounds 3 --stops 3

On a primary and one hot standby of its own on this machine (tests/support/replication.py: PostgreSQL 15,
`pg_basebackup -R`, streaming), seeded with `--shipments` demo shipments (benchkit.seed) on the primary, the
service under gunicorn -w 2 with the project's gunicorn.conf.py (its threaded worker), rate limits raised:

- reads: `--reads` GET /shipments?limit=25 of acme's token from `--clients` threads, with
  SHIPTRACK_DATABASE_REPLICA_URL naming the standby and, in the same round, without it (every read on the
  primary). The primary's transactions (pg_stat_database xact_commit + xact_rollback of the bench database,
  read from its `postgres` database) are counted from before gunicorn starts until it has stopped and the
  count has settled (an idle backend reports its counts only at its next statement or its end), and the
  standby's likewise; beside them, those of a gunicorn that starts, waits as long, and serves no read (what
  the workers' start costs by itself). Each gunicorn first serves WARM reads (the renderings stored, the
  lags measured), counted with the others: the figures are per 1,000 of all of them. The primary's
  statements of each round with the standby serving are listed by pg_stat_statements (loaded on both
  servers for the bench), most called first: what the remaining transactions are. The target: at most
  200 transactions on the primary per 1,000 reads with the standby serving.
- stops: with the standby serving, `--clients` threads read without pause; the primary is stopped
  (`pg_ctl stop -m immediate`, a crash) and the seconds from the stop to the first 200 of a request sent
  after it are measured; then the primary is started again and the standby caught up before the next
  stop. The target: at most 5 s (the median of `--stops`).

Any answer not 2xx (outside a stop's window, from the stop to that first 200) or a count that did not
settle makes the run INVALID: it is printed in capitals and the bench exits with status 1.
"""
import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psycopg2
import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchkit import RAISED_LIMITS, ROOT, acme_token, run, seed, start_service  # noqa: E402

sys.path.insert(0, str(ROOT))
from tests.support.replication import Server  # noqa: E402

DATABASE = "shiptrack_standby_bench"
WARM = 200
QUIET, SETTLE_AT_MOST = 2.0, 60.0
TRANSACTIONS_SQL = "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = %s"


def transactions(server):
    """The bench database's transactions on `server`, read from its `postgres` database as they are now."""
    conn = psycopg2.connect(server.url("postgres"), connect_timeout=5)
    try:
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute("SET stats_fetch_consistency = none")
            cur.execute(TRANSACTIONS_SQL, (DATABASE,))
            return cur.fetchone()[0]
    finally:
        conn.close()


def settled(server):
    """transactions(server) once it has stayed the same for QUIET seconds; None when it kept changing."""
    last, since, started = transactions(server), time.monotonic(), time.monotonic()
    while time.monotonic() - since < QUIET:
        if time.monotonic() - started > SETTLE_AT_MOST:
            return None
        time.sleep(0.25)
        now = transactions(server)
        if now != last:
            last, since = now, time.monotonic()
    return last


def statements(server, reset=False):
    """The bench database's statements on `server` by pg_stat_statements, most called first ([(calls, query)]);
    with `reset`, forget them instead. Asked in the bench database (the extension's), outside the counts."""
    conn = psycopg2.connect(server.url(DATABASE), connect_timeout=5)
    try:
        conn.autocommit = True
        with conn.cursor() as cur:
            if reset:
                cur.execute("SELECT pg_stat_statements_reset()")
                return []
            cur.execute("SELECT s.calls, left(regexp_replace(s.query, '\\s+', ' ', 'g'), 90) FROM pg_stat_statements s "
                        "JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = %s ORDER BY s.calls DESC LIMIT 12",
                        (DATABASE,))
            return cur.fetchall()
    finally:
        conn.close()


def load(url, headers, count, clients):
    """The status of each of `count` GETs of `url` from `clients` threads (None: a connection error)."""
    def get(_number):
        try:
            return requests.get(url, headers=headers, timeout=30).status_code
        except requests.RequestException:
            return None
    with ThreadPoolExecutor(clients) as pool:
        return list(pool.map(get, range(count)))


def serve(env, port, replica):
    """gunicorn -w 2 of the service, reading from `replica` (a URL) or from the primary alone (None)."""
    env = {**env, "SHIPTRACK_RATE_LIMITS": RAISED_LIMITS}
    if replica:
        env["SHIPTRACK_DATABASE_REPLICA_URL"] = replica
    return start_service(env, port, workers=2)


def stop(master):
    master.terminate()
    master.wait()


def counted(primary, standby, env, port, replica, work):
    """(primary's transactions, standby's, seconds, work's result) over one gunicorn, from before it starts
    until it has stopped and both counts have settled (None where one did not)."""
    before = settled(primary), settled(standby)
    master = serve(env, port, replica)
    started = time.monotonic()
    try:
        result = work(f"http://127.0.0.1:{port}")
    finally:
        stop(master)
    seconds = time.monotonic() - started
    after = settled(primary), settled(standby)
    deltas = [None if b is None or a is None else a - b for b, a in zip(before, after)]
    return deltas[0], deltas[1], seconds, result


def reads(args, primary, standby, env, headers, replica):
    """{figure: value} of `--reads` list reads over one gunicorn (after WARM of them), and of an idle one as long."""
    wrong = []

    def measured(base):
        url = f"{base}/shipments?limit=25"
        statuses = load(url, headers, WARM, args.clients)
        time.sleep(2)   # the lags measured (every second)
        started = time.monotonic()
        statuses += load(url, headers, args.reads, args.clients)
        wrong.extend(status for status in statuses if not (status and 200 <= status < 300))
        return time.monotonic() - started

    statements(primary, reset=True)
    primary_count, standby_count, seconds, read_seconds = counted(primary, standby, env, args.port, replica, measured)
    on_primary = statements(primary)

    def idle(base):
        time.sleep(max(0.0, seconds - 1))
    idle_primary, idle_standby, _, _ = counted(primary, standby, env, args.port, replica, idle)
    return {"primary": primary_count, "standby": standby_count, "idle_primary": idle_primary,
            "idle_standby": idle_standby, "reads_per_second": args.reads / read_seconds, "statements": on_primary,
            "wrong": len(wrong) + (None in (primary_count, standby_count, idle_primary, idle_standby))}


def outage(args, primary, standby, env, headers, replica):
    """{figure: value} of one stop of the primary under reads: seconds from the stop to the first 200 sent after it."""
    answers, stopping = [], threading.Event()
    stopped_at = [None]

    def client(base):
        while not stopping.is_set():
            sent = time.monotonic()
            try:
                status = requests.get(f"{base}/shipments?limit=25", headers=headers, timeout=30).status_code
            except requests.RequestException:
                status = None
            answers.append((sent, time.monotonic(), status))

    master = serve(env, args.port, replica)
    base = f"http://127.0.0.1:{args.port}"
    try:
        load(f"{base}/shipments?limit=25", headers, WARM, args.clients)
        time.sleep(2)
        threads = [threading.Thread(target=client, args=(base,)) for _ in range(args.clients)]
        for thread in threads:
            thread.start()
        time.sleep(2)
        stopped_at[0] = time.monotonic()
        primary.stop("immediate")
        stopped = time.monotonic()
        time.sleep(args.after)
        stopping.set()
        for thread in threads:
            thread.join()
    finally:
        stop(master)
        if not (primary.data / "postmaster.pid").exists():
            primary.start()
    first = min((answered for sent, answered, status in answers if sent >= stopped and status == 200), default=None)
    window_end = first if first is not None else float("inf")
    wrong = [status for sent, answered, status in answers
             if status != 200 and not (stopped_at[0] <= answered <= window_end)]
    failed_in_window = sum(1 for sent, answered, status in answers if status != 200 and answered <= window_end)
    return {"seconds": None if first is None else first - stopped_at[0], "stop_took": stopped - stopped_at[0],
            "answers": len(answers), "in_window_not_200": failed_in_window, "wrong": len(wrong) + (first is None)}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shipments", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--stops", type=int, default=3)
    parser.add_argument("--reads", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--after", type=float, default=6.0, help="seconds of reads after each stop")
    parser.add_argument("--port", type=int, default=18831)
    args = parser.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="shiptrack-standby-bench-"))
    primary = Server.primary(folder / "primary")
    standby = None
    try:
        with open(primary.data / "postgresql.conf", "a") as conf:   # the standby's copy too (pg_basebackup)
            conf.write("shared_preload_libraries = 'pg_stat_statements'\n")
        primary.stop()
        primary.start()
        url = primary.url(DATABASE)
        env = {**os.environ, "DATABASE_URL": url}
        seed(primary.url("postgres"), env, args.shipments, DATABASE)
        admin = psycopg2.connect(url)
        admin.autocommit = True
        admin.cursor().execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        admin.close()
        standby = primary.standby(folder / "standby")
        replica = standby.url(DATABASE)
        headers = {"Authorization": f"Bearer {acme_token(env, 'standby bench')}"}
        assert standby.replayed(primary), "the standby did not catch up"
        valid = True
        results = {"with the standby": [], "without (primary only)": []}
        for number in range(args.rounds):
            for name, replica_url in (("with the standby", replica), ("without (primary only)", None)):
                figures = reads(args, primary, standby, env, headers, replica_url)
                results[name].append(figures)
                print(f"round {number + 1}: {name}: {json.dumps(figures)}", flush=True)
                if figures["wrong"]:
                    valid = False
                    print(f"ROUND {number + 1}: {name.upper()} MET ANSWERS NOT 2XX OR COUNTS THAT DID NOT SETTLE: "
                          f"IT DOES NOT COUNT", flush=True)
        stops = []
        for number in range(args.stops):
            assert standby.replayed(primary), "the standby did not catch up"
            figures = outage(args, primary, standby, env, headers, replica)
            stops.append(figures)
            print(f"stop {number + 1}: {json.dumps(figures)}", flush=True)
            if figures["wrong"]:
                valid = False
                print(f"STOP {number + 1} MET ANSWERS NOT 200 OUTSIDE THE OUTAGE, OR NO 200: IT DOES NOT COUNT",
                      flush=True)
        reads_in_all = WARM + args.reads
        for name, rounds in results.items():
            per_thousand = statistics.median(each["primary"] * 1000 / reads_in_all for each in rounds)
            print(f"median {name}: {per_thousand:.0f} primary transactions per 1,000 reads "
                  f"(an idle gunicorn as long: {statistics.median(each['idle_primary'] for each in rounds)}), "
                  f"{statistics.median(each['standby'] * 1000 / reads_in_all for each in rounds):.0f} on the standby; "
                  f"{statistics.median(each['reads_per_second'] for each in rounds):.0f} reads/s"
                  + (f"; target at most 200: {'met' if per_thousand <= 200 else 'NOT MET'}"
                     if name == "with the standby" else ""), flush=True)
        seconds = [each["seconds"] for each in stops if each["seconds"] is not None]
        if seconds:
            median = statistics.median(seconds)
            print(f"median seconds from the stop to the first 200: {median:.2f} (each: "
                  f"{', '.join(f'{each:.2f}' for each in seconds)}); target at most 5: "
                  f"{'met' if median <= 5 else 'NOT MET'}", flush=True)
        if not valid:
            print("THE RUN MET ANSWERS IT SHOULD NOT HAVE: ITS FIGURES ARE INVALID", flush=True)
    finally:
        for server in (standby, primary):
            if server is not None:
                server.remove()
        shutil.rmtree(folder, ignore_errors=True)
    sys.exit(0 if valid else 1)


if __name__ == "__main__":
    main()
