"""An unplanned failover that loses WAL (bench/failover.py --unplanned): what receivers and a mirror are promised.

Each round: a primary and a hot standby of its own, the checkout's service and `python -m delivery --watch` on
the multi-host URL, the HTTPS receiver, and a mirror following GET /changes (its cursor kept, as docs/sync.md's).
SHIPMENTS commits make events (webhooks received, the mirror reads them); the standby stops (`stop("fast")`),
so what follows is WAL it never gets: SHIPMENTS more commits on the primary, their webhooks received and the
mirror reading them; the primary crashes (`stop("immediate")`), the standby starts and is promoted, and
SHIPMENTS more commits. Per round:

- commits lost: acknowledged commits of the lost line absent on the new primary (asynchronous replication);
- webhook-ids reused: ids the receiver got for two different bodies (target 0);
- mirror: whether its cursor was refused with 400 (it starts again from the beginning, not silent), and the
  changes skipped silently: shipments whose state in the mirror, caught up, differs from the new primary's
  (target 0).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests

from bench.benchkit import RAISED_LIMITS, answers
from models import db
from tests.support.factories import auth
from tests.support.processes import free_port, wait_for
from tests.support.replication import Server, multi_host_url
from tests.support.webhooks import TEST_SECRET_KEY

SHIPMENTS = 40  # more events than the 32 a sequence logs ahead of what it hands out


ARRANGE = """
import json, sys
from models import db, migrations
from tests.support.factories import make_org, make_shipment, make_token
from tests.support.webhooks import add_endpoint
conn = db.connect(sys.argv[1])
conn.autocommit = True
migrations.apply_fresh_schema(conn)
org = make_org(conn, "acme")
add_endpoint(conn, org, sys.argv[2])
shipments = [make_shipment(conn, org, status="draft") for _ in range(int(sys.argv[3]))]
print(json.dumps([make_token(conn, org), shipments]))
"""


def arrange(checkout, primary, hooks):
    """With `checkout`'s own schema and factories: an organization with a token, an endpoint and shipments."""
    admin = primary.connect()
    admin.cursor().execute("CREATE DATABASE shiptrack")
    admin.close()
    made = subprocess.run([sys.executable, "-c", ARRANGE, primary.url("shiptrack"), hooks.url("/ok", host="127.0.0.1"),
                           str(SHIPMENTS)], cwd=checkout, check=True, capture_output=True, text=True)
    return json.loads(made.stdout.splitlines()[-1])


def commits(url, shipments, status):
    """One commit per shipment, each making one event."""
    conn = db.connect(db.Target(url, connect_timeout=2))
    conn.autocommit = True
    try:
        for shipment in shipments:
            db.execute(conn, "UPDATE shipments SET status = %(s)s WHERE id = %(id)s", {"s": status, "id": shipment})
    finally:
        conn.close()


def follow(base, token, mirror):
    """Catch the mirror up with GET /changes, from its cursor; whether the cursor was refused (400)."""
    refused = False
    while True:
        params = {"since": mirror["since"]} if mirror["since"] else {}
        response = requests.get(base + "/changes", params=params, headers=auth(token), timeout=30)
        if response.status_code == 400 and response.json()["error"]["param"] == "since":
            refused, mirror["since"] = True, None
            mirror["shipments"].clear()
            continue
        response.raise_for_status()
        page = response.json()
        for item in page["data"]:
            if item.get("deleted"):
                mirror["shipments"].pop(item["id"], None)
            else:
                mirror["shipments"][item["id"]] = item["status"]
        mirror["since"] = page["next_since"]
        if not page["has_more"]:
            return refused


def reused(hooks):
    """webhook-ids received for two different bodies."""
    bodies = {}
    for request in hooks.requests:
        headers = {name.lower(): value for name, value in request["headers"].items()}
        bodies.setdefault(headers["webhook-id"], set()).add(request["body"])
    return sum(len(seen) > 1 for seen in bodies.values())


def one_round(checkout, hooks, bundle):
    """One failover that loses WAL; (commits lost, webhook-ids reused, cursor refused, changes skipped)."""
    folder = Path(tempfile.mkdtemp(prefix="shiptrack-bench-unplanned-"))
    primary = Server.primary(folder / "primary")
    servers, processes = [primary], []
    hooks.requests.clear()
    try:
        token, shipments = arrange(checkout, primary, hooks)
        standby = primary.standby(folder / "standby")
        servers.append(standby)
        url = multi_host_url([primary, standby], "shiptrack", target_session_attrs="read-write")
        env = {**os.environ, "DATABASE_URL": url, "SHIPTRACK_SECRET_KEY": json.dumps(TEST_SECRET_KEY),
               "SHIPTRACK_RATE_LIMITS": RAISED_LIMITS, "SHIPTRACK_WEBHOOK_ALLOWED_NETWORKS": '["127.0.0.1/32"]',
               "SHIPTRACK_WEBHOOK_CA_BUNDLE": bundle}
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        processes.append(subprocess.Popen([str(Path(sys.executable).parent / "gunicorn"), "-w", "2", "-b",
                                           f"127.0.0.1:{port}", "app:create_app()"], cwd=checkout, env=env,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        assert wait_for(lambda: answers(base + "/healthz"), 60), "gunicorn did not start"
        processes.append(subprocess.Popen([sys.executable, "-m", "delivery", "--watch"], cwd=checkout, env=env,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        mirror = {"since": None, "shipments": {}}
        commits(url, shipments, "validated")
        assert wait_for(lambda: len(hooks.requests) >= SHIPMENTS, 120), "the first webhooks did not arrive"
        follow(base, token, mirror)
        assert standby.replayed(primary)

        standby.stop("fast")  # from here on, WAL the standby never gets
        commits(primary.url("shiptrack"), shipments, "draft")
        assert wait_for(lambda: len(hooks.requests) >= 2 * SHIPMENTS, 120), "the lost line's webhooks"
        follow(base, token, mirror)
        time.sleep(0.5)
        primary.stop("immediate")

        standby.start()
        standby.promote()
        conn = db.connect(standby.url("shiptrack"))
        conn.autocommit = True
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT count(*) AS n FROM shipments WHERE id = ANY(%s) AND status <> 'draft'",
                            (shipments,))
                lost = cur.fetchone()["n"]
            commits(url, shipments, "in_transit")
            assert wait_for(lambda: len(hooks.requests) >= 3 * SHIPMENTS, 120), "no webhooks after the promotion"
            refused = follow(base, token, mirror)
            with conn.cursor() as cur:
                cur.execute("SELECT id, status FROM shipments WHERE id = ANY(%s)", (shipments,))
                truth = {f"shp_{row['id']}": row["status"] for row in cur.fetchall()}
        finally:
            conn.close()
        skipped = sum(mirror["shipments"].get(shipment) != status for shipment, status in truth.items())
        return lost, reused(hooks), refused, skipped
    finally:
        for process in processes:
            process.terminate()
            process.wait(30)
        for server in servers:
            server.remove()
        shutil.rmtree(folder, ignore_errors=True)


def run(rounds, checkouts, hooks, bundle):
    """Every round with each checkout, printed."""
    for number in range(1, rounds + 1):
        for name, checkout in checkouts.items():
            lost, ids, refused, skipped = one_round(checkout, hooks, bundle)
            print(f"round {number} {name:4}: {lost}/{SHIPMENTS} acknowledged commits lost, {ids} webhook-ids reused, "
                  f"mirror cursor {'refused (400)' if refused else 'accepted'}, {skipped} changes skipped silently",
                  flush=True)
