"""A mirror of every shipment kept by GET /changes while the data changes (not a test).

    .venv/bin/python bench/api.py --shipments 100000     # once: seed the bench database
    .venv/bin/python bench/mirror.py --minutes 5         # then: initial copy, 5 minutes of changes

Uses the bench database of bench/api.py on $DATABASE_URL's server (else the embedded one) and
applies schema.sql to it first. Phase 1 makes the initial copy by walking the feed from the start
(rate limits raised for it, and reported). Phase 2 serves with the default per-token limit (600 per
5 minutes; the per-address limit stays raised, as the copy's requests still count in its window),
with a new token: a writer applies `--changes-per-minute` changes of every kind a shipment shows (status,
ETA, notes, containers, labels, checks, packing lines, hiding and showing again), each in its own
transaction on its own connection, like the application; the mirror polls every `--poll-seconds`
with If-None-Match, as docs/sync.md's poller does. It reports requests per minute and the lag from
a change's commit to the poll that brought it, then checks the copy: the revision of every
shipment, and the full JSON of every changed one against GET /shipments/{id}.
Only 127.0.0.1 is contacted.
"""
import argparse
import os
import random
import statistics
import sys
import threading
import time
from pathlib import Path

import psycopg2
import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchkit import RAISED_LIMITS, acme_id, acme_token, bench_url, percentile, run, start_gunicorn  # noqa: E402

STEADY_LIMITS = '{"window_seconds":300,"per_token":600,"per_ip":10000000,"anonymous_per_ip":10000000}'
STATUSES = ("validated", "in_transit", "arrived", "in_warehouse")


class Mirror:
    """The poller of docs/sync.md, counting its requests and noting when each revision arrived."""

    def __init__(self, base, token):
        self.base = base
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Bearer {token}"
        self.since = None
        self.etag = None
        self.shipments = {}
        self.arrived = {}            # id -> [(revision, time it arrived)]
        self.requests = self.not_modified = 0

    def sync(self):
        while True:
            headers = {"If-None-Match": self.etag} if self.etag else {}
            response = self.session.get(f"{self.base}/changes", params={"since": self.since} if self.since else {},
                                        headers=headers, timeout=60)
            self.requests += 1
            if response.status_code == 304:
                self.not_modified += 1
                return
            if response.status_code == 429:
                raise SystemExit(f"rate limited: {response.headers.get('RateLimit')}")
            response.raise_for_status()
            page, now = response.json(), time.time()
            for item in page["data"]:
                self.arrived.setdefault(item["id"], []).append((item["revision"], now))
                if item.get("deleted"):
                    self.shipments.pop(item["id"], None)
                else:
                    self.shipments[item["id"]] = item
            self.since, self.etag = page["next_since"], response.headers["ETag"]
            if not page["has_more"]:
                return


class Writer(threading.Thread):
    """Changes at a steady rate, each committed alone; records (shipment, revision, commit time)."""

    def __init__(self, url, organization_id, per_minute, seed=7):
        super().__init__(daemon=True)
        self.conn = psycopg2.connect(url)
        self.organization_id = organization_id
        self.interval = 60 / per_minute
        self.rng = random.Random(seed)
        self.stop = threading.Event()
        self.commits = []
        self.hidden = []
        with self.conn.cursor() as cur:
            cur.execute("""SELECT id FROM shipments WHERE organization_id = %s AND NOT awaiting_approval
                           AND NOT owned_elsewhere ORDER BY id""", (organization_id,))
            self.ids = [row[0] for row in cur.fetchall()]
            cur.execute("SELECT id FROM labels WHERE organization_id = %s ORDER BY id", (organization_id,))
            self.labels = [row[0] for row in cur.fetchall()]
        self.conn.commit()

    def change(self, cur):
        """One change of a random kind; returns the shipment it changed."""
        shipment = self.rng.choice(self.ids)
        kind = self.rng.randrange(8)
        if kind == 0:
            cur.execute("UPDATE shipments SET status = %s WHERE id = %s", (self.rng.choice(STATUSES), shipment))
        elif kind == 1:
            cur.execute("UPDATE shipments SET eta = now() + %s * interval '1 hour' WHERE id = %s",
                        (self.rng.randint(1, 900), shipment))
        elif kind == 2:
            cur.execute("UPDATE shipments SET notes = %s WHERE id = %s", (f"bench {self.rng.random()}", shipment))
        elif kind == 3:
            cur.execute("INSERT INTO containers (organization_id, shipment_id, seal_number) VALUES (%s, %s, 'B')",
                        (self.organization_id, shipment))
        elif kind == 4 and self.labels:
            cur.execute("""INSERT INTO shipment_labels (shipment_id, label_id) VALUES (%s, %s)
                           ON CONFLICT DO NOTHING""", (shipment, self.rng.choice(self.labels)))
            if cur.rowcount == 0:
                cur.execute("DELETE FROM shipment_labels WHERE shipment_id = %s", (shipment,))
        elif kind == 5:
            cur.execute("""INSERT INTO checks (organization_id, shipment_id, key, category, title, status)
                           VALUES (%s, %s, 'bench', 'bench', 'Bench check', %s)
                           ON CONFLICT (shipment_id, key) DO UPDATE SET status = EXCLUDED.status""",
                        (self.organization_id, shipment, self.rng.choice(("passed", "failed", "warning"))))
        elif kind == 6:
            cur.execute("UPDATE packing_lines SET box_count = box_count + 1 WHERE id = (SELECT min(id) FROM "
                        "packing_lines WHERE shipment_id = %s)", (shipment,))
            if cur.rowcount == 0:
                cur.execute("UPDATE shipments SET notes = 'no packing lines' WHERE id = %s", (shipment,))
        elif self.hidden and self.rng.random() < 0.5:
            shipment = self.hidden.pop()
            cur.execute("UPDATE shipments SET awaiting_approval = false WHERE id = %s", (shipment,))
        else:
            cur.execute("UPDATE shipments SET awaiting_approval = true WHERE id = %s", (shipment,))
            self.hidden.append(shipment)
        return shipment

    def run(self):
        next_at = time.monotonic()
        while not self.stop.is_set():
            with self.conn.cursor() as cur:
                # A change that changes nothing (a status set to the one it has) is not one: draw again.
                changed = False
                while not changed:
                    shipment = self.change(cur)
                    cur.execute("SELECT revision, change_xid = pg_current_xact_id() FROM shipments WHERE id = %s",
                                (shipment,))
                    revision, changed = cur.fetchone()
            self.conn.commit()
            self.commits.append((f"shp_{shipment}", revision, time.time()))
            next_at += self.interval
            self.stop.wait(max(0.0, next_at - time.monotonic()))


def lags(commits, arrived):
    """Seconds from each commit to the first arrival of that revision or a later one."""
    found = []
    for shipment, revision, committed in commits:
        times = [at for seen, at in arrived.get(shipment, []) if seen >= revision and at >= committed]
        if times:
            found.append(min(times) - committed)
    return found


def check(url, organization_id, mirror, commits, base, token):
    """(shipments compared, revision mismatches, changed shipments whose JSON differs)."""
    conn = psycopg2.connect(url)
    with conn.cursor() as cur:
        cur.execute("""SELECT 'shp_' || id, revision FROM shipments WHERE organization_id = %s
                       AND NOT awaiting_approval AND NOT owned_elsewhere""", (organization_id,))
        truth = dict(cur.fetchall())
    conn.close()
    copy = {shipment_id: item["revision"] for shipment_id, item in mirror.shipments.items()}
    wrong = {key for key in truth.keys() | copy.keys() if truth.get(key) != copy.get(key)}
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {token}"
    differ = 0
    for shipment_id in sorted({shipment for shipment, _r, _t in commits} & truth.keys()):
        if session.get(f"{base}/shipments/{shipment_id}", timeout=60).json() != mirror.shipments.get(shipment_id):
            differ += 1
    return len(truth), len(wrong), differ


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=5)
    parser.add_argument("--changes-per-minute", type=float, default=50)
    parser.add_argument("--poll-seconds", type=float, default=30)
    parser.add_argument("--port", type=int, default=18766)
    args = parser.parse_args()

    url, _server = bench_url()
    env = {**os.environ, "DATABASE_URL": url}
    run("db", "init", env=env)                  # the bench database may predate the feed's columns
    token = acme_token(env, "mirror")
    organization_id = acme_id(url)
    base = f"http://127.0.0.1:{args.port}"

    server = start_gunicorn({**env, "SHIPTRACK_RATE_LIMITS": RAISED_LIMITS}, args.port, workers=2)
    try:
        mirror = Mirror(base, token)
        started = time.monotonic()
        mirror.sync()
        copy_seconds = time.monotonic() - started
        print(f"initial copy: {len(mirror.shipments)} shipments in {mirror.requests} requests, "
              f"{copy_seconds:.1f} s ({mirror.requests / copy_seconds:.1f} requests/s; rate limits raised)",
              flush=True)
    finally:
        server.terminate()
        server.wait()

    # The default per-token limit (600 per 5 minutes) with a second token, since the first one's copy
    # requests still count in the current window; for the same reason the per-address limit (shared by
    # every token from 127.0.0.1) stays raised.
    token = acme_token(env, "mirror-steady")
    server = start_gunicorn({**env, "SHIPTRACK_RATE_LIMITS": STEADY_LIMITS}, args.port, workers=2)
    try:
        mirror.session.headers["Authorization"] = f"Bearer {token}"
        mirror.requests = mirror.not_modified = 0
        writer = Writer(url, organization_id, args.changes_per_minute)
        writer.start()
        started = time.monotonic()
        deadline = started + args.minutes * 60
        while time.monotonic() < deadline:
            time.sleep(min(args.poll_seconds, max(0.0, deadline - time.monotonic())))
            mirror.sync()
        writer.stop.set()
        writer.join()
        elapsed_minutes = (time.monotonic() - started) / 60
        polls = mirror.requests
        mirror.sync()                         # the changes of the last interval
        found = lags(writer.commits, mirror.arrived)
        compared, wrong, differ = check(url, organization_id, mirror, writer.commits, base, token)
    finally:
        server.terminate()
        server.wait()
    print(f"changes: {len(writer.commits)} in {elapsed_minutes:.1f} min "
          f"({len(writer.commits) / elapsed_minutes:.1f}/min), to {len({c[0] for c in writer.commits})} shipments")
    print(f"requests: {polls} in {elapsed_minutes:.1f} min = {polls / elapsed_minutes:.2f}/min "
          f"({mirror.not_modified} of them 304), +{mirror.requests - polls} for the final poll")
    if found:
        print(f"lag commit -> mirror: p50 {statistics.median(found):.1f} s, p95 {percentile(found, 0.95):.1f} s, "
              f"max {max(found):.1f} s over {len(found)} changes (poll every {args.poll_seconds:g} s)")
    print(f"copy: {compared} visible shipments, {wrong} with a wrong revision or missing/extra, "
          f"{differ} changed shipments whose JSON differs from GET /shipments/{{id}}")
    if wrong or differ or len(found) != len(writer.commits):
        raise SystemExit("the mirror is NOT exact")
    print("the mirror is exact")


if __name__ == "__main__":
    main()
