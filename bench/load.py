"""Everything at once on one database (not a test): two web instances, a watcher and cron passes,
a writer changing shipments, pollers on the API and an HTTPS receiver counting every webhook.

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/postgres .venv/bin/python bench/load.py --minutes 5

Creates and drops its own database (bench_load_<pid>) with the demo data of `--shipments`. Two
gunicorn instances (2 workers each) serve it; `python -m delivery --watch` runs throughout and a
cron-style `python -m delivery` pass starts every minute beside it. Writers commit
`--changes-per-second` status or ETA changes in all (over `--writers` connections), each in its own
transaction; pollers read `/shipments?limit=100` and `/changes` from both instances
(`--reads-per-second` each). At the end it waits for delivery to drain and reports: 5xx answers
(target 0), events lost (made for the endpoint but never received) and duplicated (the same
webhook-id received twice) (targets 0), p50/p95 read latency per instance, and commit-to-arrival
of the webhooks. Only 127.0.0.1 is contacted.
"""
import argparse
import http.server
import json
import os
import queue
import random
import socketserver
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg2
import requests
import trustme

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchkit import RAISED_LIMITS, ROOT, acme_id, acme_token, percentile, run, start_gunicorn  # noqa: E402

from delivery import signing  # noqa: E402
from models import db, webhooks  # noqa: E402



class Receiver(socketserver.ThreadingMixIn, http.server.HTTPServer):
    """An HTTPS endpoint that answers 200 at once and queues (webhook-id, shipment, revision, arrival)."""

    daemon_threads = True
    request_queue_size = 1024

    def __init__(self, context):
        super().__init__(("127.0.0.1", 0), ReceiverHandler)
        self.socket = context.wrap_socket(self.socket, server_side=True)
        self.arrivals = queue.Queue()


class ReceiverHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        arrived = time.time()
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")
        shipment = body["data"]["object"]
        self.server.arrivals.put((self.headers["webhook-id"], shipment.get("id"), shipment.get("revision"), arrived))


class Writer(threading.Thread):
    """Status and ETA changes at a steady rate; records (shipment, revision) -> commit time."""

    def __init__(self, url, organization_id, per_second, number=0, of=1):
        super().__init__(daemon=True)
        self.url = url
        self.conn = psycopg2.connect(url)
        self.interval = 1 / per_second
        self.rng = random.Random(11 + number)
        self.stop = threading.Event()
        self.commits = {}
        with self.conn.cursor() as cur:
            # Each writer its own shipments: like separate users, they never wait for each other's locks.
            cur.execute("""SELECT id FROM shipments WHERE organization_id = %s AND NOT awaiting_approval
                           AND NOT owned_elsewhere AND id %% %s = %s""", (organization_id, of, number))
            self.ids = [row[0] for row in cur.fetchall()]
        self.conn.commit()

    def run(self):
        next_at = time.monotonic()
        while not self.stop.is_set():
            shipment = self.rng.choice(self.ids)
            try:
                row = self.change(shipment)
            except (psycopg2.OperationalError, psycopg2.InterfaceError):
                # The server went away (bench/topology.py stops it): like an application, try again on a new
                # connection a moment later; a change that did not commit is not counted.
                self.stop.wait(0.5)
                self.reconnect()
                continue
            if row is not None:
                self.commits[(f"shp_{shipment}", row[0])] = time.time()
            next_at += self.interval
            self.stop.wait(max(0.0, next_at - time.monotonic()))

    def reconnect(self):
        """A new connection in place of a lost one (none while the server is still away)."""
        try:
            self.conn.close()
            self.conn = psycopg2.connect(self.url)
        except psycopg2.OperationalError:
            pass

    def change(self, shipment):
        """One status or ETA change of `shipment` in its own transaction; (revision,) or None."""
        with self.conn.cursor() as cur:
            if self.rng.random() < 0.5:
                # Always to another status, so that every change is one (and one event).
                cur.execute("""UPDATE shipments SET status = CASE status WHEN 'validated' THEN 'in_transit'
                                 WHEN 'in_transit' THEN 'arrived' WHEN 'arrived' THEN 'in_warehouse'
                                 ELSE 'validated' END
                                WHERE id = %s RETURNING revision""", (shipment,))
            else:
                cur.execute("UPDATE shipments SET eta = now() + %s * interval '1 hour' WHERE id = %s "
                            "RETURNING revision", (self.rng.randint(1, 2000), shipment))
            row = cur.fetchone()
        self.conn.commit()
        return row


class Poller(threading.Thread):
    """Reads from one instance as fast as it answers; records latency and status of every request."""

    def __init__(self, base, token, paths, per_second):
        super().__init__(daemon=True)
        self.base, self.paths, self.interval = base, paths, 1 / per_second
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Bearer {token}"
        self.stop = threading.Event()
        self.latencies, self.statuses = [], Counter()
        self.answers = []  # (monotonic time, status, ms, Content-Type) of every request

    def run(self):
        number = 0
        next_at = time.monotonic()
        while not self.stop.is_set():
            next_at += self.interval
            path = self.paths[number % len(self.paths)]
            number += 1
            started = time.perf_counter()
            kind = None
            try:
                response = self.session.get(self.base + path, timeout=30)
                status, kind = response.status_code, response.headers.get("Content-Type")
            except requests.RequestException as error:
                status = type(error).__name__
            self.latencies.append((time.perf_counter() - started) * 1000)
            self.statuses[status] += 1
            self.answers.append((time.monotonic(), status, self.latencies[-1], kind))
            self.stop.wait(max(0.0, next_at - time.monotonic()))


def drain(url, endpoint, seconds):
    """Wait until every event is rendered and every delivery to `endpoint` finished (or `seconds` pass).

    Returns the webhook-ids made for the endpoint and how many of its deliveries have not succeeded.
    """
    conn = psycopg2.connect(url)
    try:
        with conn.cursor() as cur:
            until = time.monotonic() + seconds
            while time.monotonic() < until:
                cur.execute("""SELECT count(*) FILTER (WHERE ev.state = 'pending') +
                                      (SELECT count(*) FROM webhook_deliveries d WHERE d.endpoint_id = %s
                                          AND d.state = 'pending')
                                 FROM events ev""", (endpoint,))
                conn.commit()
                if cur.fetchone()[0] == 0:
                    break
                time.sleep(1)
            cur.execute("""SELECT 'msg_' || ev.id FROM events ev JOIN webhook_deliveries d ON d.event_id = ev.id
                            WHERE d.endpoint_id = %s""", (endpoint,))
            expected = {row[0] for row in cur.fetchall()}
            cur.execute("SELECT count(*) FROM webhook_deliveries WHERE endpoint_id = %s AND state <> 'succeeded'",
                        (endpoint,))
            return expected, cur.fetchone()[0]
    finally:
        conn.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=5)
    parser.add_argument("--changes-per-second", type=float, default=50)
    parser.add_argument("--writers", type=int, default=2, help="connections sharing the changes")
    parser.add_argument("--reads-per-second", type=float, default=20, help="per instance")
    parser.add_argument("--shipments", type=int, default=2000)
    parser.add_argument("--drain-seconds", type=float, default=120)
    args = parser.parse_args()

    server_url = os.environ.get("DATABASE_URL") or sys.exit("set DATABASE_URL to a PostgreSQL server")
    name = f"bench_load_{os.getpid()}"
    admin = psycopg2.connect(urlunsplit(urlsplit(server_url)._replace(path="/postgres")))
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute(f'CREATE DATABASE "{name}"')
    url = urlunsplit(urlsplit(server_url)._replace(path="/" + name))
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    bundle = tempfile.NamedTemporaryFile("wb", suffix=".pem", delete=False)
    bundle.write(ca.cert_pem.bytes())
    bundle.close()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    cert.configure_cert(context)
    receiver = Receiver(context)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    env = {**os.environ, "DATABASE_URL": url, "SHIPTRACK_WEBHOOK_ALLOWED_NETWORKS": '["127.0.0.1/32"]',
           "SHIPTRACK_WEBHOOK_CA_BUNDLE": bundle.name, "SHIPTRACK_RATE_LIMITS": RAISED_LIMITS}
    processes = []
    try:
        run("db", "init", env=env)
        run("demo", "seed", "--shipments", str(args.shipments), env=env)
        token = acme_token(env, "load")
        organization_id = acme_id(url)
        conn = psycopg2.connect(url)
        with conn.cursor() as cur:
            # What the seed left for delivery is none of this benchmark's business.
            cur.execute("UPDATE events SET state = 'skipped' WHERE state = 'pending'")
        conn.commit()
        endpoint_conn = db.connect(url)
        endpoint = webhooks.create_endpoint(endpoint_conn, organization_id,
                                            f"https://127.0.0.1:{receiver.server_address[1]}/hook",
                                            ["shipment.status_changed", "shipment.eta_changed"], "load",
                                            signing.new_secret())["id"]
        endpoint_conn.commit()
        endpoint_conn.close()
        time.sleep(0.01)                      # the endpoint strictly older than the events

        ports = (18771, 18772)
        for port in ports:
            processes.append(start_gunicorn(env, port, workers=2))
        processes.append(subprocess.Popen([sys.executable, "-m", "delivery", "--watch"], cwd=ROOT, env=env))
        pollers = [Poller(f"http://127.0.0.1:{port}", token, ["/shipments?limit=100", "/changes?limit=100"],
                          args.reads_per_second) for port in ports]
        writers = [Writer(url, organization_id, args.changes_per_second / args.writers, number, args.writers)
                   for number in range(args.writers)]
        for thread in (*pollers, *writers):
            thread.start()
        started = time.monotonic()
        deadline = started + args.minutes * 60
        cron_passes = []
        next_cron = started + 60
        while time.monotonic() < deadline:
            time.sleep(1)
            if time.monotonic() >= next_cron:
                cron_passes.append(subprocess.Popen([sys.executable, "-m", "delivery"], cwd=ROOT, env=env))
                next_cron += 60
        for thread in (*pollers, *writers):
            thread.stop.set()
        for thread in (*pollers, *writers):
            thread.join()
        commits = {key: at for writer in writers for key, at in writer.commits.items()}
        elapsed = time.monotonic() - started

        expected, unfinished = drain(url, endpoint, args.drain_seconds)
        for process in cron_passes:
            process.wait(timeout=120)
        arrivals = []
        while not receiver.arrivals.empty():
            arrivals.append(receiver.arrivals.get())
    finally:
        for process in processes:
            process.terminate()
            process.wait(timeout=30)
        receiver.shutdown()
        with admin.cursor() as cur:
            cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()
        os.unlink(bundle.name)

    received = Counter(webhook_id for webhook_id, _s, _r, _t in arrivals)
    lost = expected - set(received)
    duplicated = sum(count - 1 for count in received.values() if count > 1)
    lags = [arrived - commits[(shipment, revision)] for _id, shipment, revision, arrived in arrivals
            if (shipment, revision) in commits]
    print(f"{elapsed / 60:.1f} min: {len(commits)} changes committed by {len(writers)} writers "
          f"({len(commits) / elapsed:.1f}/s), {len(cron_passes)} cron passes beside the watcher")
    for port, poller in zip(ports, pollers):
        fivexx = sum(count for status, count in poller.statuses.items() if not isinstance(status, int) or status >= 500)
        print(f"instance :{port}: {sum(poller.statuses.values())} reads, statuses {dict(poller.statuses)}, "
              f"5xx or no answer {fivexx}, p50 {statistics.median(poller.latencies):.1f} ms, "
              f"p95 {percentile(poller.latencies, 0.95):.1f} ms")
    print(f"webhooks: {len(expected)} deliveries made, {sum(received.values())} requests received, "
          f"lost {len(lost)}, duplicated {duplicated}, unfinished {unfinished}")
    if lags:
        print(f"commit -> arrival: p50 {statistics.median(lags) * 1000:.0f} ms, "
              f"p95 {percentile(lags, 0.95) * 1000:.0f} ms, max {max(lags) * 1000:.0f} ms over {len(lags)}")


if __name__ == "__main__":
    main()
