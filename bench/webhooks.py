"""Webhook delivery benchmark (not a test): 10,000 events to 5 local HTTPS endpoints.

Endpoints: three answer at once, one answers after 9 s, one refuses connections.
Phase 1 runs cron passes (`python -m delivery`, 45 s each) back to back, `--processes` of them at once
(default 1; docs/webhooks.md: several processes share each endpoint's cap). Deliveries are counted
where they arrive: the receiver (bench/webhook_receiver.py) counts each endpoint's requests by
webhook-id and verifies their signatures. The rate is distinct events received by the three healthy
endpoints over the time from the start of the first pass (process start and rendering included) to
the last of them arriving; duplicates (an id received twice) and losses (an id never received) are
counted, and the database's `succeeded` rows are checked against the arrivals. CPU seconds of the
delivery process, the receiver and the database backends are reported per 1,000 deliveries.
Phase 2 runs `python -m delivery --watch` and reports p50/p95 from the commit of a change to its
arrival at a healthy receiver.

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/postgres .venv/bin/python bench/webhooks.py

`--code DIR` runs the delivery script of another checkout (a `git worktree` of older code) against
the same setup, for before/after comparisons. Creates and drops its own database
(bench_webhooks_<pid>); only 127.0.0.1 is contacted.
"""
import argparse
from contextlib import contextmanager
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg2

PROJECT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT))

from bench import webhook_receiver  # noqa: E402
from bench.proc_cpu import cpu_seconds  # noqa: E402
from delivery import signing  # noqa: E402
from delivery.secret_key import SecretKeys  # noqa: E402
from models import db, webhooks  # noqa: E402
from tests.support.databases import apply_schema  # noqa: E402

STATUSES = ("validated", "in_transit", "arrived", "in_warehouse", "draft")
HEALTHY = ("fast-a", "fast-b", "fast-c")


def free_port():
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    return port


def with_database(url, name):
    return urlunsplit(urlsplit(url)._replace(path="/" + name))


def ask(control, command, argument=None):
    control.send((command, argument))
    return control.recv()


def succeeded(conn, endpoints):
    """The database's succeeded deliveries per endpoint name."""
    with conn.cursor() as cur:
        cur.execute("SELECT endpoint_id, count(*) FROM webhook_deliveries WHERE state = 'succeeded' GROUP BY 1")
        found = {row["endpoint_id"]: row["count"] for row in cur.fetchall()}
    conn.commit()
    return {name: found.get(endpoint_id, 0) for name, endpoint_id in endpoints.items()}


def backend_cpu(conn, seen):
    """Add the CPU seconds of this database's backends (same machine only) to `seen` {pid: seconds}."""
    with conn.cursor() as cur:
        cur.execute("SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()")
        pids = [row["pid"] for row in cur.fetchall()]
    conn.commit()
    for pid in pids:
        seconds = cpu_seconds(pid)
        if seconds is not None:  # an ended backend keeps what was last seen of it
            seen[pid] = seconds


def make_events(conn, shipments, rounds):
    with conn.cursor() as cur:
        cur.execute("SELECT id FROM organizations WHERE slug = 'bench'")
        org = cur.fetchone()["id"]
        cur.execute("INSERT INTO shipments (organization_id) SELECT %s FROM generate_series(1, %s)", (org, shipments))
    conn.commit()
    for number in range(rounds):
        with conn.cursor() as cur:
            cur.execute("UPDATE shipments SET status = %s", (STATUSES[number % len(STATUSES)],))
        conn.commit()


def phase_cron(conn, control, env, code, endpoints, events, slow_limit, processes=1):
    """Back-to-back rounds of `processes` passes at once until the healthy endpoints have every event."""
    started_wall, started = time.time(), time.monotonic()
    receiver_cpu = ask(control, "stats")["cpu_seconds"]
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    backends, healthy_done, passes = {}, None, 0
    while True:
        running = [subprocess.Popen([sys.executable, "-m", "delivery"], cwd=code, env=env)
                   for _ in range(processes)]
        while any(process.poll() is None for process in running):
            time.sleep(0.25)
            backend_cpu(conn, backends)
            stats = ask(control, "stats")["endpoints"]
            if healthy_done is None and all(stats[n]["distinct"] >= events for n in HEALTHY):
                healthy_done = max(stats[n]["last"] for n in HEALTHY) - started_wall
                print(f"  healthy endpoints done: {3 * events} deliveries in {healthy_done:.1f} s", flush=True)
        passes += processes
        stats = ask(control, "stats")
        elapsed = time.monotonic() - started
        got = {n: (e["distinct"], e["duplicates"]) for n, e in stats["endpoints"].items()}
        print(f"  {passes} passes ended at {elapsed:.1f} s: received (distinct, duplicates) {got}", flush=True)
        if healthy_done is not None and (stats["endpoints"]["slow"]["distinct"] >= events or elapsed > slow_limit):
            break
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    received = stats["endpoints"]
    first = min(received[n]["first"] for n in HEALTHY)
    in_database = succeeded(conn, endpoints)
    with conn.cursor() as cur:
        cur.execute("SELECT count(*) FROM webhook_attempts WHERE endpoint_id = %s", (endpoints["dead"],))
        dead_attempts = cur.fetchone()["count"]
    conn.commit()
    delivered = sum(received[n]["distinct"] for n in HEALTHY)
    per_thousand = 1000 / delivered if delivered else 0
    return {
        "healthy_seconds": round(healthy_done, 2),
        "healthy_per_second": round(3 * events / healthy_done, 1),
        "healthy_per_second_first_to_last_arrival": round(3 * events / (healthy_done - (first - started_wall)), 1),
        "duplicates": sum(received[n]["duplicates"] for n in HEALTHY),
        "lost": sum(events - received[n]["distinct"] for n in HEALTHY),
        "bad_signatures": sum(e["bad_signatures"] for e in received.values()),
        "database_agrees": all(in_database[n] == received[n]["distinct"] for n in HEALTHY),
        "slow_delivered": received["slow"]["distinct"], "elapsed": round(elapsed, 1), "passes": passes,
        "dead_attempts": dead_attempts,
        "cpu_seconds_per_1000_deliveries": {
            "delivery": round((usage.ru_utime + usage.ru_stime - children.ru_utime - children.ru_stime)
                              * per_thousand, 3),
            "receiver": round((stats["cpu_seconds"] - receiver_cpu) * per_thousand, 3),
            "database": round(sum(backends.values()) * per_thousand, 3)},
    }


def phase_watch(conn, control, env, code, changes, interval):
    """Changes committed one by one while --watch runs; commit-to-arrival at fast-a."""
    process = subprocess.Popen([sys.executable, "-m", "delivery", "--watch"], cwd=code, env=env)
    time.sleep(3)
    ask(control, "watch", True)
    with conn.cursor() as cur:
        cur.execute("SELECT id FROM shipments ORDER BY id LIMIT %s", (changes,))
        ids = [row["id"] for row in cur.fetchall()]
    conn.commit()
    committed = {}
    for sid in ids:
        with conn.cursor() as cur:
            # Always a real change (a shipment phase 1 already moved to in_transit would send no event).
            cur.execute("UPDATE shipments SET status = CASE WHEN status = 'in_transit' THEN 'arrived' "
                        "ELSE 'in_transit' END WHERE id = %s", (sid,))
        conn.commit()
        committed[f"shp_{sid}"] = time.time()
        time.sleep(interval)
    deadline = time.time() + 60
    while time.time() < deadline and len(arrived := ask(control, "arrivals")) < len(committed):
        time.sleep(0.5)
    process.terminate()
    process.wait(60)
    values = sorted(arrived[s] - at for s, at in committed.items() if s in arrived)
    return {"changes": len(committed), "per_second": round(1 / interval, 1), "arrived": len(values),
            "p50": round(statistics.median(values), 4), "p95": round(values[int(0.95 * (len(values) - 1))], 4),
            "max": round(values[-1], 4)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10000)
    parser.add_argument("--slow-limit", type=float, default=300, help="stop phase 1 after this many seconds")
    parser.add_argument("--watch-changes", type=int, default=300)
    parser.add_argument("--watch-interval", type=float, default=0.05)
    parser.add_argument("--code", default=str(PROJECT), help="checkout whose `python -m delivery` is measured")
    parser.add_argument("--processes", type=int, default=1,
                        help="cron passes started together in phase 1 (they share each endpoint's cap)")
    args = parser.parse_args()

    with bench_delivery("bench_webhooks", args.code) as (conn, control, ports, env):
        apply_schema(conn)
        with conn.cursor() as cur:
            cur.execute("INSERT INTO organizations (name, slug) VALUES ('Bench', 'bench') RETURNING id")
            org = cur.fetchone()["id"]
        urls = {n: f"https://127.0.0.1:{ports[n]}/{n}" for n in webhook_receiver.NAMES}
        urls["dead"] = f"https://127.0.0.1:{free_port()}/dead"
        secrets = {key: signing.new_secret() for key in urls}
        # With SHIPTRACK_SECRET_KEY set they are stored encrypted, as the CLI stores them (docs/secret-key.md).
        keys = SecretKeys([env["SHIPTRACK_SECRET_KEY"]] if env.get("SHIPTRACK_SECRET_KEY") else [])
        endpoints = {key: webhooks.create_endpoint(conn, org, value, ["shipment.status_changed"], key,
                                                   keys.seal(secrets[key]))["id"] for key, value in urls.items()}
        print("endpoint secrets stored", "encrypted" if keys.configured else "as plain text")
        conn.commit()
        ask(control, "secrets", {n: secrets[n] for n in webhook_receiver.NAMES})
        time.sleep(0.01)  # endpoints strictly older than the events
        shipments = 1000
        started = time.monotonic()
        make_events(conn, shipments, args.events // shipments)
        print(f"{args.events} events committed in {time.monotonic() - started:.1f} s")
        cron = phase_cron(conn, control, env, args.code, endpoints, args.events, args.slow_limit, args.processes)
        print("phase 1 (cron passes):", json.dumps(cron, indent=2), flush=True)
        watch = phase_watch(conn, control, env, args.code, args.watch_changes, args.watch_interval)
        print("phase 2 (--watch, commit to arrival, seconds):", json.dumps(watch, indent=2))


@contextmanager
def bench_delivery(prefix, code):
    """A database of its own (no schema yet) and the receivers: (connection, control, ports, the delivery's env).

    The database is dropped and the receivers stopped at the end.
    """
    server_url = os.environ.get("DATABASE_URL") or sys.exit("set DATABASE_URL to a PostgreSQL server")
    name = f"{prefix}_{os.getpid()}"
    admin = psycopg2.connect(with_database(server_url, "postgres"))
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute(f'CREATE DATABASE "{name}"')
    url = with_database(server_url, name)
    receiver, control, ports, bundle = webhook_receiver.start()
    env = {**os.environ, "DATABASE_URL": url, "SHIPTRACK_WEBHOOK_ALLOWED_NETWORKS": '["127.0.0.1/32"]',
           "SHIPTRACK_WEBHOOK_CA_BUNDLE": bundle}
    print("delivery code:", code, "settings:",
          {k: v for k, v in env.items() if k.startswith("SHIPTRACK_WEBHOOK_") and "CA_BUNDLE" not in k})
    conn = db.connect(url)
    try:
        yield conn, control, ports, env
    finally:
        conn.close()
        receiver.terminate()
        with admin.cursor() as cur:
            cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()
        os.unlink(bundle)


if __name__ == "__main__":
    main()
