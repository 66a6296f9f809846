"""Webhook delivery benchmark (not a test): 10,000 events to 5 local HTTPS endpoints.

Endpoints: three answer at once, one answers after 9 s, one refuses connections.
Phase 1 runs cron passes (`python -m delivery`, 45 s each) back to back and reports the
wall time and deliveries per second until every healthy delivery is done (and how far
the slow endpoint got). Phase 2 runs `python -m delivery --watch` and reports p50/p95
from the commit of a change to its arrival at a healthy receiver.

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/postgres .venv/bin/python bench/webhooks.py

Creates and drops its own database (bench_webhooks_<pid>); only 127.0.0.1 is contacted.
"""
import argparse
import http.server
import json
import multiprocessing
import os
import socket
import socketserver
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg2
import trustme

PROJECT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT))

from delivery import signing  # noqa: E402
from models import db, webhooks  # noqa: E402

STATUSES = ("validated", "in_transit", "arrived", "in_warehouse", "draft")


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # as production servers do; else each reply waits for a delayed ACK

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        arrived = time.time()
        if self.path.startswith("/slow"):
            time.sleep(9)
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")
        if self.path.startswith("/fast-a"):
            event = json.loads(body)
            self.server.arrivals.put((event["data"]["object"]["id"], event["id"], arrived))


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    request_queue_size = 1024


def serve(cert_pem, key_pem, ports, arrivals):
    """Receiver process: four HTTPS servers (three fast, one slow) on 127.0.0.1."""
    import threading

    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    with tempfile.NamedTemporaryFile("wb", suffix=".pem", delete=False) as handle:
        handle.write(cert_pem + key_pem)
    context.load_cert_chain(handle.name)
    servers = []
    for _ in range(4):
        server = Server(("127.0.0.1", 0), Handler)
        server.socket = context.wrap_socket(server.socket, server_side=True)
        server.arrivals = arrivals
        servers.append(server)
        threading.Thread(target=server.serve_forever, daemon=True).start()
    ports.put([s.server_address[1] for s in servers])
    while True:
        time.sleep(3600)


def free_port():
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    return port


def with_database(url, name):
    return urlunsplit(urlsplit(url)._replace(path="/" + name))


def counts(conn):
    with conn.cursor() as cur:
        cur.execute("SELECT endpoint_id, state, count(*) FROM webhook_deliveries GROUP BY 1, 2")
        found = {}
        for row in cur.fetchall():
            found.setdefault(row["endpoint_id"], {})[row["state"]] = row["count"]
        cur.execute("SELECT count(*) FROM events WHERE state = 'pending'")
        return found, cur.fetchone()["count"]


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


def phase_cron(conn, env, endpoints, events, slow_limit):
    """Back-to-back passes until the healthy endpoints have every event; returns figures."""
    healthy = [endpoints[name] for name in ("fast-a", "fast-b", "fast-c")]
    started = time.monotonic()
    healthy_done_at = None
    passes = 0
    while True:
        process = subprocess.Popen([sys.executable, "-m", "delivery"], cwd=PROJECT, env=env)
        while process.poll() is None:
            time.sleep(1)
            found, _pending = counts(conn)
            conn.commit()
            delivered = sum(found.get(e, {}).get("succeeded", 0) for e in healthy)
            if healthy_done_at is None and delivered >= 3 * events:
                healthy_done_at = time.monotonic() - started
                print(f"  healthy endpoints done: {delivered} deliveries in {healthy_done_at:.1f} s")
        passes += 1
        found, pending = counts(conn)
        conn.commit()
        slow = found.get(endpoints["slow"], {}).get("succeeded", 0)
        elapsed = time.monotonic() - started
        print(f"  pass {passes} ended at {elapsed:.1f} s: {json.dumps(found)} events waiting to render: {pending}")
        if healthy_done_at is not None and (slow >= events or elapsed > slow_limit):
            break
    with conn.cursor() as cur:
        cur.execute("SELECT count(*) FROM webhook_attempts WHERE endpoint_id = %s", (endpoints["dead"],))
        dead_attempts = cur.fetchone()["count"]
    conn.commit()
    return {"healthy_seconds": healthy_done_at, "healthy_per_second": 3 * events / healthy_done_at,
            "slow_delivered": slow, "slow_per_second": slow / elapsed, "elapsed": elapsed,
            "dead": found.get(endpoints["dead"], {}), "dead_attempts": dead_attempts, "passes": passes}


def phase_watch(conn, env, arrivals, changes, interval):
    """Changes committed one by one while --watch runs; commit-to-arrival at fast-a."""
    process = subprocess.Popen([sys.executable, "-m", "delivery", "--watch"], cwd=PROJECT, env=env)
    time.sleep(3)
    while not arrivals.empty():
        arrivals.get()
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
    delays = {}
    deadline = time.time() + 60
    while len(delays) < len(committed) and time.time() < deadline:
        try:
            shipment, _event, arrived = arrivals.get(timeout=1)
        except Exception:
            continue
        if shipment in committed and shipment not in delays:
            delays[shipment] = arrived - committed[shipment]
    process.terminate()
    process.wait(60)
    values = sorted(delays.values())
    return {"changes": len(committed), "arrived": len(values), "p50": statistics.median(values),
            "p95": values[int(0.95 * (len(values) - 1))], "max": values[-1]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10000)
    parser.add_argument("--slow-limit", type=float, default=300, help="stop phase 1 after this many seconds")
    parser.add_argument("--watch-changes", type=int, default=300)
    parser.add_argument("--watch-interval", type=float, default=0.05)
    args = parser.parse_args()

    server_url = os.environ.get("DATABASE_URL") or sys.exit("set DATABASE_URL to a PostgreSQL server")
    name = f"bench_webhooks_{os.getpid()}"
    admin = psycopg2.connect(with_database(server_url, "postgres"))
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute(f'CREATE DATABASE "{name}"')
    url = with_database(server_url, name)
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    bundle = tempfile.NamedTemporaryFile("wb", suffix=".pem", delete=False)
    bundle.write(ca.cert_pem.bytes())
    bundle.close()
    ports, arrivals = multiprocessing.Queue(), multiprocessing.Queue()
    receiver = multiprocessing.Process(target=serve, daemon=True, args=(
        cert.cert_chain_pems[0].bytes(), cert.private_key_pem.bytes(), ports, arrivals))
    receiver.start()
    fast_a, fast_b, fast_c, slow = ports.get(timeout=30)
    env = {**os.environ, "DATABASE_URL": url, "SHIPTRACK_WEBHOOK_ALLOWED_NETWORKS": '["127.0.0.1/32"]',
           "SHIPTRACK_WEBHOOK_CA_BUNDLE": bundle.name}
    conn = db.connect(url)
    try:
        db.apply_schema(conn)
        with conn.cursor() as cur:
            cur.execute("INSERT INTO organizations (name, slug) VALUES ('Bench', 'bench') RETURNING id")
            org = cur.fetchone()["id"]
        urls = {"fast-a": f"https://127.0.0.1:{fast_a}/fast-a", "fast-b": f"https://127.0.0.1:{fast_b}/fast-b",
                "fast-c": f"https://127.0.0.1:{fast_c}/fast-c", "slow": f"https://127.0.0.1:{slow}/slow",
                "dead": f"https://127.0.0.1:{free_port()}/dead"}
        endpoints = {key: webhooks.create_endpoint(conn, org, value, ["shipment.status_changed"], key,
                                                   signing.new_secret())["id"] for key, value in urls.items()}
        conn.commit()
        time.sleep(0.01)  # endpoints strictly older than the events
        shipments = 1000
        started = time.monotonic()
        make_events(conn, shipments, args.events // shipments)
        print(f"{args.events} events committed in {time.monotonic() - started:.1f} s")
        cron = phase_cron(conn, env, endpoints, args.events, args.slow_limit)
        print("phase 1 (cron passes):", json.dumps(cron, indent=2))
        watch = phase_watch(conn, env, arrivals, args.watch_changes, args.watch_interval)
        print("phase 2 (--watch, commit to arrival, seconds):", json.dumps(watch, indent=2))
    finally:
        conn.close()
        receiver.terminate()
        with admin.cursor() as cur:
            cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()
        os.unlink(bundle.name)


if __name__ == "__main__":
    main()
