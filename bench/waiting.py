"""Pollers that wait (GET /changes?wait=) beside plain polling, in one run (not a test).

    .venv/bin/python bench/waiting.py                  # about 6 minutes

On a database of its own (`shiptrack_bench_waiting` on $DATABASE_URL's server, else the embedded one) holding
`--organizations` organizations of `--shipments` shipments each, the service under gunicorn with 2 workers and
the service's gunicorn.conf.py (rate limits raised, the access log to /dev/null):

- latency: `--waiters` pollers spread over the organizations follow the feed, while a writer commits one
  change a `--write-every` seconds to a shipment of a random organization (its own connection, autocommit).
  For every poller of that organization, the time from the commit to the answer that brought the change.
  First the pollers wait (`wait=60`, calling again at once), then they poll every `--poll-seconds` without
  waiting (If-None-Match, as a poller without `wait` would), for `--seconds` each. Targets: p95 at most
  250 ms with 200 waiters (plain polling: about the interval).
- list: GET /shipments?limit=25 of the first organization, `--list-requests` from 4 threads, p99, with
  `--waiters` requests held (nothing written meanwhile) and without, alternating, `--rounds` each. Target:
  held/none at most 1.2.
- memory: the RSS of both workers (/proc) once the pollers' requests have been answered once, then with them
  all held; the difference per held request. Target: at most 64 KB.
- idle: one poller of an organization nobody writes to, waiting with `wait=60` as docs/sync.md's does, for
  the whole run: requests per minute. Target: at most 1.
- cap: a second instance of 1 worker holding at most 50 (WAITERS_PER_PROCESS) holds 50, then `--cap-calls`
  calls with `wait=60` one after another: answered at once (X-Poll-Interval 5), their time. Target: at most
  50 ms.

Prints every figure and the targets. Only 127.0.0.1 is contacted.
"""
import argparse
import os
import random
import statistics
import sys
import threading
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchkit import RAISED_LIMITS, bench_url, percentile, schema_database, start_service  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.support.factories import make_org, make_shipment, make_token  # noqa: E402

DATABASE = "shiptrack_bench_waiting"


class Poller(threading.Thread):
    """One client following an organization's feed, waiting (`wait`) or polling every `interval` seconds."""

    def __init__(self, base, organization, token, arrived):
        super().__init__(daemon=True)
        self.base, self.organization, self.arrived = base, organization, arrived
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Bearer {token}"
        self.since, self.etag, self.requests = None, None, 0
        self.mode, self.stopping, self.answered = "wait", False, threading.Event()

    def call(self, wait=None):
        params = {**({"since": self.since} if self.since else {}), **({"wait": wait} if wait else {})}
        headers = {"If-None-Match": self.etag} if self.etag and not wait else {}
        response = self.session.get(f"{self.base}/changes", params=params, headers=headers, timeout=90)
        self.requests += 1
        now = time.monotonic()
        if response.status_code == 304:
            return 0
        response.raise_for_status()
        page = response.json()
        for item in page["data"]:
            self.arrived.append((self.organization, item["id"], item["revision"], now))
        self.since, self.etag = page["next_since"], response.headers["ETag"]
        return int(response.headers["X-Poll-Interval"])

    def run(self):
        while self.call() == 0 and not self.stopping:   # catch up
            pass
        self.answered.set()
        while not self.stopping:
            if self.mode == "wait":
                time.sleep(self.call(60))
            else:
                self.call()
                time.sleep(self.mode)


def writer(url, shipments, seconds, every, commits):
    """Commit a change to a random shipment every `every` s for `seconds`; note (organization, id, revision, time)."""
    import psycopg2
    conn = psycopg2.connect(url)
    conn.autocommit = True
    ends = time.monotonic() + seconds
    with conn.cursor() as cur:
        while time.monotonic() < ends:
            organization, shipment = random.choice(shipments)
            cur.execute("UPDATE shipments SET notes = %s WHERE id = %s RETURNING revision", (str(time.time()), shipment))
            commits.append((organization, f"shp_{shipment}", cur.fetchone()[0], time.monotonic()))
            time.sleep(every)
    conn.close()


def touch_every_organization(url, shipments):
    """One change to a shipment of each organization: every request held at its head is answered."""
    import psycopg2
    conn = psycopg2.connect(url)
    conn.autocommit = True
    with conn.cursor() as cur:
        for shipment in {organization: shipment for organization, shipment in shipments}.values():
            cur.execute("UPDATE shipments SET notes = 'touched' || now() WHERE id = %s", (shipment,))
    conn.close()


def latencies(commits, arrived, pollers_of):
    """Seconds from each commit to each of its organization's pollers' answers that brought it."""
    first = {}
    for organization, shipment, revision, at in arrived:
        first.setdefault((organization, shipment, revision), []).append(at)
    found = []
    for organization, shipment, revision, at in commits:
        seen = first.get((organization, shipment, revision), [])
        found += [answered - at for answered in seen]
        found += [None] * (pollers_of[organization] - len(seen))   # not seen: the change was overtaken
    return [seconds for seconds in found if seconds is not None]


def worker_rss(master):
    """KB of resident memory of the master's children (the workers)."""
    total = 0
    for pid in Path(f"/proc/{master.pid}/task/{master.pid}/children").read_text().split():
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1])
    return total


def list_p99(base, token, count):
    """p99 in ms of `count` GET /shipments?limit=25 from 4 threads."""
    times, lock = [], threading.Lock()

    def client(n):
        session = requests.Session()
        session.headers["Authorization"] = f"Bearer {token}"
        for _ in range(n):
            started = time.perf_counter()
            assert session.get(f"{base}/shipments?limit=25", timeout=30).status_code == 200
            with lock:
                times.append((time.perf_counter() - started) * 1000)

    threads = [threading.Thread(target=client, args=(count // 4,)) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return percentile(times, 0.99)


def hold(base, tokens, since_of, count):
    """`count` requests held (threads calling with wait=60 at the head); returns the threads."""
    threads = []
    for n in range(count):
        organization, token = tokens[n % len(tokens)]
        thread = threading.Thread(target=requests.get, daemon=True, kwargs={
            "url": f"{base}/changes?since={since_of[organization]}&wait=60",
            "headers": {"Authorization": f"Bearer {token}"}, "timeout": 90})
        thread.start()
        threads.append(thread)
    return threads


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--organizations", type=int, default=20)
    parser.add_argument("--shipments", type=int, default=50)
    parser.add_argument("--waiters", type=int, default=200)
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--write-every", type=float, default=0.5)
    parser.add_argument("--poll-seconds", type=float, default=5)
    parser.add_argument("--list-requests", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--cap-calls", type=int, default=50)
    parser.add_argument("--port", type=int, default=8765)
    args = parser.parse_args()
    url, server = bench_url(DATABASE)
    conn = schema_database(server, DATABASE)
    organizations = [make_org(conn, f"org{n}") for n in range(args.organizations + 1)]
    idle_organization, organizations = organizations[-1], organizations[:-1]
    tokens = [(organization, make_token(conn, organization)) for organization in organizations]
    shipments = [(organization, make_shipment(conn, organization, reference=f"R{organization}-{n}"))
                 for organization in organizations for n in range(args.shipments)]
    env = {**os.environ, "DATABASE_URL": url, "SHIPTRACK_RATE_LIMITS": RAISED_LIMITS}
    print(f"{args.organizations} organizations of {args.shipments} shipments, {args.waiters} pollers, "
          f"gunicorn -w 2; load average {os.getloadavg()[0]:.1f}", flush=True)
    master = start_service(env, args.port, 2)
    base = f"http://127.0.0.1:{args.port}"
    try:
        # Memory first, on workers that have held nothing yet: warmed by a call of each token, then 200 held.
        since_of = {organization: requests.get(f"{base}/changes?limit=100", timeout=30, headers={
            "Authorization": f"Bearer {token}"}).json()["next_since"] for organization, token in tokens * 3}
        time.sleep(2)
        rss_before = worker_rss(master)
        held_threads = hold(base, tokens, since_of, args.waiters)
        time.sleep(5)
        figures = {"rss": (worker_rss(master) - rss_before) / args.waiters}
        touch_every_organization(url, shipments)
        for thread in held_threads:
            thread.join()
        idle = Poller(base, idle_organization, make_token(conn, idle_organization), [])
        idle.start()
        idle_started = time.monotonic()
        arrived = []
        pollers = [Poller(base, *tokens[n % len(tokens)], arrived) for n in range(args.waiters)]
        pollers_of = {organization: sum(p.organization == organization for p in pollers) for organization in organizations}
        for mode in ("wait", args.poll_seconds):
            for poller in pollers:
                poller.mode = mode
            if mode != "wait":
                touch_every_organization(url, shipments)   # the held requests answered: polling from now on
                time.sleep(2)
            if mode == "wait":
                for poller in pollers:
                    poller.start()
                for poller in pollers:
                    poller.answered.wait()
            commits = []
            arrived.clear()
            requests_before = sum(poller.requests for poller in pollers)
            writer(url, shipments, args.seconds, args.write_every, commits)
            time.sleep(args.poll_seconds + 1)
            found = latencies(commits, arrived, pollers_of)
            sent = sum(poller.requests for poller in pollers) - requests_before
            name = "waiting (wait=60)" if mode == "wait" else f"polling every {mode:g} s"
            figures[mode] = percentile(found, 0.95)
            print(f"{name}: {len(commits)} commits, {len(found)} answers, commit to answer p50 "
                  f"{statistics.median(found) * 1000:.0f} ms, p95 {figures[mode] * 1000:.0f} ms, "
                  f"max {max(found) * 1000:.0f} ms; {sent / len(pollers) / args.seconds * 60:.1f} requests "
                  f"per poller per minute", flush=True)
        for poller in pollers:
            poller.stopping = True
        for poller in pollers:
            poller.join()
        print(f"memory: {figures['rss']:.1f} KB of worker RSS per held request ({args.waiters} held, "
              f"{rss_before} KB before)", flush=True)
        # The list, with the pollers' requests held and without (the pollers stopped once answered).
        since_of = {}
        for organization, token in tokens:
            since_of[organization] = requests.get(f"{base}/changes?limit=100&since=0.0", timeout=30, headers={
                "Authorization": f"Bearer {token}"}).json()["next_since"]
        ratios = []
        for _round in range(args.rounds):
            without = list_p99(base, tokens[0][1], args.list_requests)
            held_threads = hold(base, tokens, since_of, args.waiters)
            time.sleep(3)
            with_held = list_p99(base, tokens[0][1], args.list_requests)
            ratios.append(with_held / without)
            touch_every_organization(url, shipments)
            print(f"GET /shipments?limit=25 p99: {without:.1f} ms without, {with_held:.1f} ms with {args.waiters} "
                  f"held: {with_held / without:.2f}", flush=True)
            for thread in held_threads:
                thread.join()
            since_of = {organization: requests.get(f"{base}/changes?since={since}", timeout=30, headers={
                "Authorization": f"Bearer {token}"}).json()["next_since"]
                for (organization, token), since in zip(tokens, since_of.values())}
        idle.stopping = True
        idle_minutes, idle_requests = (time.monotonic() - idle_started) / 60, idle.requests - 1   # less its first
        idle_rate = idle_requests / idle_minutes
        print(f"idle mirror (wait=60): {idle_requests} requests in {idle_minutes:.1f} minutes, {idle_rate:.2f} a "
              f"minute", flush=True)
    finally:
        master.terminate()
        master.wait()
    # Above the cap: one worker holding at most 50.
    master = start_service({**env, "SHIPTRACK_WAITERS_PER_PROCESS": "50"}, args.port, 1)
    try:
        since_of = {organization: requests.get(f"{base}/changes?limit=100", timeout=30, headers={
            "Authorization": f"Bearer {token}"}).json()["next_since"] for organization, token in tokens}
        held_threads = hold(base, tokens, since_of, 50)
        time.sleep(3)
        session, times = requests.Session(), []
        organization, token = tokens[0]
        for _ in range(args.cap_calls):
            started = time.perf_counter()
            response = session.get(f"{base}/changes?since={since_of[organization]}&wait=60", timeout=90,
                                   headers={"Authorization": f"Bearer {token}"})
            times.append((time.perf_counter() - started) * 1000)
            assert response.headers["X-Poll-Interval"] == "5", response.headers
        print(f"above the cap: {args.cap_calls} calls answered at once, p50 {statistics.median(times):.1f} ms, "
              f"max {max(times):.1f} ms", flush=True)
    finally:
        master.terminate()
        master.wait()
    print(f"targets: commit to answer p95 {figures['wait'] * 1000:.0f} ms (at most 250; polling "
          f"{figures[args.poll_seconds] * 1000:.0f}), list p99 ratio {statistics.median(ratios):.2f} (at most 1.2), "
          f"{figures['rss']:.1f} KB per held request (at most 64), idle mirror "
          f"{idle_rate:.2f} requests a minute (at most 1), above the cap "
          f"{max(times):.1f} ms (at most 50); load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
