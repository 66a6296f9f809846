"""What recording metrics costs the list page: metrics on against off, in one run, interleaved (not a test).

    .venv/bin/python bench/metrics_cost.py --rounds 10 --seconds 10

Two instances of the service under gunicorn with the project's gunicorn.conf.py (2 sync workers each,
the access log on, to /dev/null), one with SHIPTRACK_METRICS_ENABLED=false, on the same database.
`--clients` threads ask GET /shipments?limit=100 as fast as answers come, each alternating between
the two instances request by request (half of them starting with each), so that whatever else the
machine does falls on both alike: on a shared machine, back-to-back runs of one and then the other
differed by more than 20 % between rounds. A closed loop's throughput is the inverse of its time per
request, so each round prints both instances' requests/s (requests per second of waiting) and the
ratio on/off; then the median ratio of the rounds (the target: at least 0.97, metrics cost at most 3 %).
`--control` turns metrics off in both: the ratio two equal instances give on this machine now.
"""
import argparse
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path

import psycopg2
import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchkit import RAISED_LIMITS, acme_token, bench_url, seed, start_service  # noqa: E402

PORTS = {"on": 18791, "off": 18792}


def has_demo(url):
    """Whether the database at `url` exists and holds the demo organization."""
    try:
        conn = psycopg2.connect(url)
    except psycopg2.OperationalError:
        return False
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT to_regclass('organizations') IS NOT NULL")
            if not cur.fetchone()[0]:
                return False
            cur.execute("SELECT count(*) FROM organizations WHERE slug = 'acme'")
            return cur.fetchone()[0] == 1
    finally:
        conn.close()


def alternate(targets, headers, clients, seconds):
    """{name: requests per second of waiting} of clients alternating between `targets` for `seconds`."""
    names = list(targets)
    waited = {name: [0.0, 0] for name in names}
    lock, stop = threading.Lock(), time.monotonic() + seconds

    def client(number):
        sessions = {name: requests.Session() for name in names}
        order = names if number % 2 == 0 else names[::-1]
        while time.monotonic() < stop:
            for name in order:
                started = time.perf_counter()
                sessions[name].get(targets[name], headers=headers, timeout=30).raise_for_status()
                with lock:
                    waited[name][0] += time.perf_counter() - started
                    waited[name][1] += 1
    threads = [threading.Thread(target=client, args=(number,)) for number in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return {name: count / total * clients / len(names) for name, (total, count) in waited.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--shipments", type=int, default=2000, help="demo shipments to seed a new database with")
    parser.add_argument("--database", default="shiptrack_metrics_bench")
    parser.add_argument("--control", action="store_true",
                        help="metrics off in both instances: the ratio two equal instances give (the noise floor)")
    args = parser.parse_args()

    url, server = bench_url(args.database)
    env = {**os.environ, "DATABASE_URL": url, "SHIPTRACK_RATE_LIMITS": RAISED_LIMITS}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)  # each instance makes its own (gunicorn.conf.py)
    if not has_demo(url):
        seed(server, env, args.shipments, database=args.database)
    token = acme_token(env, "metrics cost")
    enabled = {"on": not args.control, "off": False}
    processes = {name: start_service({**env, "SHIPTRACK_METRICS_ENABLED": json.dumps(enabled[name])}, port, 2)
                 for name, port in PORTS.items()}
    headers = {"Authorization": f"Bearer {token}"}
    targets = {name: f"http://127.0.0.1:{port}/shipments?limit=100" for name, port in PORTS.items()}
    ratios = []
    try:
        alternate(targets, headers, args.clients, 3)  # warm both (stored renderings, pools, prepared statements)
        for round_number in range(args.rounds):
            rates = alternate(targets, headers, args.clients, args.seconds)
            ratios.append(rates["on"] / rates["off"])
            print(f"round {round_number + 1}: metrics on {rates['on']:6.1f}/s, off {rates['off']:6.1f}/s, "
                  f"on/off {ratios[-1]:.3f}", flush=True)
        scrape = requests.get(f"http://127.0.0.1:{PORTS['on']}/metrics", timeout=10).text
        counted = [line for line in scrape.splitlines() if line.startswith("shiptrack_http_requests_total{")]
        print("counted by the instance with metrics on:", *counted, sep="\n  ")
    finally:
        for process in processes.values():
            process.terminate()
            process.wait()
    ratio = statistics.median(ratios)
    print(f"median on/off {ratio:.3f} over {len(ratios)} rounds (cost {100 * (1 - ratio):.1f} %; target: at most 3 %)")


if __name__ == "__main__":
    main()
