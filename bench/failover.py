"""A planned switchover, measured: how soon the API and the delivery process are back after a promotion.

    .venv/bin/python bench/failover.py --rounds 5 --outage 6                      # this checkout
    .venv/bin/python bench/failover.py --rounds 5 --outage 6 --code /tmp/before   # and another, alternating
    .venv/bin/python bench/failover.py --rounds 3 --outage 12 --silent            # a primary that goes silent
    .venv/bin/python bench/failover.py --rounds 2 --unplanned --code /tmp/before  # one that loses WAL: promises kept

Each round makes a primary and a hot standby of its own on this machine (tests/support/replication.py),
starts the checkout's service (gunicorn -w 2, its gunicorn.conf.py) and `python -m delivery --watch` on
the multi-host URL `postgresql://...@primary,standby/shiptrack?target_session_attrs=read-write`, an
HTTPS receiver of its own, and two clients polling GET /shipments. Then: `pg_ctl stop -m fast` of the
primary, `--outage` seconds, `pg_ctl promote -w` of the standby, and at once one commit that makes an
event. With `--silent` the primary is not stopped: the processes reach it through a TCP proxy that
then stops passing anything (a machine gone, packets dropped), while the standby is promoted. Per round:

- first 200: the first GET /shipments answered 200 after `pg_ctl promote` returned (seconds);
- webhooks again: the arrival of that event's webhook, after `pg_ctl promote` returned (seconds);
- tries/s: the delivery process's connection tries while the database was away (its
  `database unreachable, retrying` lines, per second of the outage): what its backoff costs the
  servers (each try against the standby is a session started and refused as read-only).

The medians per checkout, and with `--code` their ratios, close the output. `--unplanned` measures instead
what receivers and a mirror are promised after a failover that lost WAL (bench/failover_unplanned.py).
"""
import argparse
import json
import os
import shutil
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.benchkit import RAISED_LIMITS, ROOT, answers  # noqa: E402
from models import db  # noqa: E402
from tests.support.databases import apply_schema  # noqa: E402
from tests.support.factories import auth, make_org, make_shipment, make_token  # noqa: E402
from tests.support.processes import free_port, wait_for  # noqa: E402
from tests.support.replication import Server, multi_host_url  # noqa: E402
from tests.support.tcp_proxy import TcpProxy  # noqa: E402
from tests.support.webhooks import TEST_SECRET_KEY, Receiver, add_endpoint  # noqa: E402


def receiver():
    """An HTTPS receiver on 127.0.0.1 with a CA of its own; (receiver, CA bundle path)."""
    import trustme

    ca = trustme.CA()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    server = Receiver(context)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    bundle = tempfile.NamedTemporaryFile("wb", suffix=".pem", delete=False)
    bundle.write(ca.cert_pem.bytes())
    bundle.close()
    return server, bundle.name


def arrange(primary, hooks):
    """The schema, an organization with a token, an endpoint and a shipment; (token, shipment id)."""
    admin = primary.connect()
    admin.cursor().execute("CREATE DATABASE shiptrack")
    admin.close()
    conn = db.connect(primary.url("shiptrack"))
    conn.autocommit = True
    try:
        apply_schema(conn)
        org = make_org(conn, "acme")
        add_endpoint(conn, org, hooks.url("/ok", host="127.0.0.1"))
        return make_token(conn, org), make_shipment(conn, org)
    finally:
        conn.close()


def write(url, shipment, status):
    """One commit through the multi-host URL: the shipment's status, which makes one event."""
    conn = db.connect(db.Target(url, connect_timeout=2))  # libpq passes a silent host after 2 s
    conn.autocommit = True
    try:
        db.execute(conn, "UPDATE shipments SET status = %(status)s WHERE id = %(id)s", {"status": status, "id": shipment})
    finally:
        conn.close()


def poll(base, token, seen, done):
    """GET /shipments until `done`: (finished, status) of each."""
    while not done.is_set():
        try:
            status = requests.get(base + "/shipments", headers=auth(token), timeout=30).status_code
        except requests.RequestException:
            status = None
        seen.append((time.time(), status))
        time.sleep(0.01)


def one_round(checkout, outage, hooks, bundle, silent=False):
    """One switchover with `checkout`'s processes; (first 200, webhooks again, tries per second)."""
    folder = Path(tempfile.mkdtemp(prefix="shiptrack-bench-failover-"))
    primary = Server.primary(folder / "primary")
    servers, processes = [primary], []
    try:
        token, shipment = arrange(primary, hooks)
        standby = primary.standby(folder / "standby")
        servers.append(standby)
        url = multi_host_url([primary, standby], "shiptrack", target_session_attrs="read-write")
        proxy = TcpProxy(("127.0.0.1", primary.port)).start() if silent else None
        if silent:
            url = url.replace(f":{primary.port},", f":{proxy.port},")
        env = {**os.environ, "DATABASE_URL": url, "SHIPTRACK_SECRET_KEY": json.dumps(TEST_SECRET_KEY),
               "SHIPTRACK_RATE_LIMITS": RAISED_LIMITS, "SHIPTRACK_WEBHOOK_ALLOWED_NETWORKS": '["127.0.0.1/32"]',
               "SHIPTRACK_WEBHOOK_CA_BUNDLE": bundle}
        port = free_port()
        with open(folder / "gunicorn.log", "wb") as gunicorn_log:  # its 503s' WARNING lines
            processes.append(subprocess.Popen([str(Path(sys.executable).parent / "gunicorn"), "-w", "2", "-b",
                                               f"127.0.0.1:{port}", "app:create_app()"], cwd=checkout, env=env,
                                              stdout=subprocess.DEVNULL, stderr=gunicorn_log))
        assert wait_for(lambda: answers(f"http://127.0.0.1:{port}/healthz"), 60), "gunicorn did not start"
        log = open(folder / "delivery.log", "w+b")
        processes.append(subprocess.Popen([sys.executable, "-m", "delivery", "--watch"], cwd=checkout, env=env,
                                          stdout=log, stderr=subprocess.STDOUT))
        before = len(hooks.requests)
        write(url, shipment, "validated")
        assert wait_for(lambda: len(hooks.requests) == before + 1, 60), "the delivery process did not start"
        assert standby.replayed(primary)
        seen, done = [], threading.Event()
        pollers = [threading.Thread(target=poll, args=(f"http://127.0.0.1:{port}", token, seen, done))
                   for _ in range(2)]
        for thread in pollers:
            thread.start()
        time.sleep(1)
        log_at = log.tell()
        if silent:
            proxy.hang()
        else:
            primary.stop("fast")
        time.sleep(outage)
        standby.promote()
        promoted = time.time()
        write(url, shipment, "in_transit")
        assert wait_for(lambda: len(hooks.requests) == before + 2, 120), "no webhook after the promotion"
        assert wait_for(lambda: any(at > promoted and status == 200 for at, status in seen), 60), "no 200"
        done.set()
        for thread in pollers:
            thread.join(30)
        log.seek(log_at)
        tries = log.read().decode(errors="replace").count("database unreachable, retrying")
        log.close()
        first_200 = min(at for at, status in seen if at > promoted and status == 200) - promoted
        return first_200, hooks.requests[-1]["arrived"] - promoted, tries / outage
    finally:
        for process in processes:
            process.terminate()
            process.wait(30)
        if silent:
            proxy.stop()
        for server in servers:
            server.remove()
        shutil.rmtree(folder, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--outage", type=float, default=6.0, help="seconds between the stop and the promotion")
    parser.add_argument("--silent", action="store_true", help="the primary goes silent instead of stopping")
    parser.add_argument("--code", help="another checkout to measure beside this one (the code before a change)")
    parser.add_argument("--unplanned", action="store_true", help="a failover that loses WAL (webhook-ids, mirror)")
    args = parser.parse_args()
    hooks, bundle = receiver()
    checkouts = {"this": ROOT, **({"code": Path(args.code).resolve()} if args.code else {})}
    if args.unplanned:
        from bench.failover_unplanned import run

        run(args.rounds, checkouts, hooks, bundle)
        os.unlink(bundle)
        return
    figures = {name: [] for name in checkouts}
    for number in range(1, args.rounds + 1):
        for name, checkout in checkouts.items():
            first_200, webhooks_again, tries = one_round(checkout, args.outage, hooks, bundle, args.silent)
            figures[name].append((first_200, webhooks_again, tries))
            print(f"round {number} {name:4}: first 200 {first_200:5.2f} s, webhooks again {webhooks_again:5.2f} s, "
                  f"{tries:4.1f} tries/s while away", flush=True)
    medians = {name: [statistics.median(column) for column in zip(*rows)] for name, rows in figures.items()}
    for name, (first_200, webhooks_again, tries) in medians.items():
        print(f"median {name:4}: first 200 {first_200:5.2f} s, webhooks again {webhooks_again:5.2f} s, "
              f"{tries:4.1f} tries/s while away ({args.rounds} rounds, {args.outage:g} s outage"
              f"{', silent primary' if args.silent else ''})")
    if args.code:
        ratios = [this / code if code else float("nan") for this, code in zip(medians["this"], medians["code"])]
        print("this / code: first 200 {:.2f}, webhooks again {:.2f}, tries/s {:.2f}".format(*ratios))
    os.unlink(bundle)


if __name__ == "__main__":
    main()
