"""One organization's backlog against another's first webhook (not a test).

Organization "busy" has one endpoint and a backlog of `--backlog` events (default 20,000): status changes
of its shipments in one UPDATE, through the outbox triggers, waiting to be rendered (or, with
`--rendered`, already rendered and due an hour ago: a delivery backlog). Then organization "other" commits
one status change. `python -m delivery --watch` starts, and the bench reports the seconds from its start
to the other organization's arrival, and to the last of the backlog's (the receiver of
bench/webhook_receiver.py counts arrivals and verifies signatures: fast-a is busy's, fast-b other's).

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/postgres .venv/bin/python bench/backlog.py

`--code DIR` runs the delivery script of another checkout (a `git worktree` of older code), on a database
made from that checkout's schema.sql, for before/after comparisons. Creates and drops its own database
(bench_backlog_<pid>); only 127.0.0.1 is contacted.
"""
import argparse
import json
import subprocess
import sys
import time
from pathlib import Path


PROJECT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT))

from bench.webhooks import ask, bench_delivery  # noqa: E402
from delivery import signing  # noqa: E402
from models import webhooks  # noqa: E402


def arrange(conn, urls, backlog, rendered):
    """The two organizations, their endpoints (secrets returned), the backlog, then the other's one change."""
    secrets = {name: signing.new_secret() for name in urls}
    with conn.cursor() as cur:
        cur.execute("INSERT INTO organizations (name, slug) VALUES ('Busy', 'busy'), ('Other', 'other') RETURNING id")
        busy, other = (row["id"] for row in cur.fetchall())
        ids = {name: webhooks.create_endpoint(conn, org, urls[name], ["shipment.status_changed"], name,
                                              secrets[name])["id"]
               for name, org in (("fast-a", busy), ("fast-b", other))}
        cur.execute("INSERT INTO shipments (organization_id) SELECT %s FROM generate_series(1, %s)", (busy, backlog))
        cur.execute("INSERT INTO shipments (organization_id) VALUES (%s) RETURNING id", (other,))
        other_shipment = cur.fetchone()["id"]
    conn.commit()
    time.sleep(0.01)  # endpoints strictly older than the events
    with conn.cursor() as cur:
        cur.execute("UPDATE shipments SET status = 'validated' WHERE organization_id = %s", (busy,))
    conn.commit()
    if rendered:  # the bodies as a pass would store them are not what is measured here
        with conn.cursor() as cur:
            cur.execute("""UPDATE events SET state = 'rendered', body = '{}', api_version = '2026-10-01',
                                             rendered_at = now() WHERE state = 'pending'""")
            cur.execute("""INSERT INTO webhook_deliveries (event_id, endpoint_id, next_attempt_at)
                           SELECT id, %s, now() - interval '1 hour' FROM events""", (ids["fast-a"],))
        conn.commit()
    with conn.cursor() as cur:
        cur.execute("UPDATE shipments SET status = 'validated' WHERE id = %s", (other_shipment,))
    conn.commit()
    return secrets


def measure(control, env, code, backlog, limit):
    """Start --watch; seconds from its start to other's first arrival and to the backlog's last."""
    started = time.time()
    process = subprocess.Popen([sys.executable, "-m", "delivery", "--watch"], cwd=code, env=env)
    try:
        while time.time() - started < limit:
            time.sleep(0.1)
            stats = ask(control, "stats")["endpoints"]
            if stats["fast-b"]["first"] and stats["fast-a"]["distinct"] >= backlog:
                break
    finally:
        process.terminate()
        process.wait(60)
    stats = ask(control, "stats")["endpoints"]
    first = stats["fast-b"]["first"]
    return {"other_first_arrival_seconds": None if first is None else round(first - started, 2),
            "backlog_arrived": stats["fast-a"]["distinct"],
            "backlog_last_arrival_seconds": round(stats["fast-a"]["last"] - started, 2) if stats["fast-a"]["last"]
            else None,
            "duplicates": stats["fast-a"]["duplicates"] + stats["fast-b"]["duplicates"],
            "bad_signatures": stats["fast-a"]["bad_signatures"] + stats["fast-b"]["bad_signatures"]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backlog", type=int, default=20000)
    parser.add_argument("--rendered", action="store_true", help="the backlog is rendered and due: deliveries")
    parser.add_argument("--limit", type=float, default=180, help="stop after this many seconds")
    parser.add_argument("--code", default=str(PROJECT), help="checkout whose schema and `python -m delivery` run")
    args = parser.parse_args()

    with bench_delivery("bench_backlog", args.code) as (conn, control, ports, env):
        with conn.cursor() as cur:
            cur.execute((Path(args.code) / "schema.sql").read_text())
        conn.commit()
        urls = {n: f"https://127.0.0.1:{ports[n]}/{n}" for n in ("fast-a", "fast-b")}
        ask(control, "secrets", arrange(conn, urls, args.backlog, args.rendered))
        result = measure(control, env, args.code, args.backlog, args.limit)
        print(json.dumps({"backlog": args.backlog, "rendered": args.rendered, **result}, indent=2))


if __name__ == "__main__":
    main()
