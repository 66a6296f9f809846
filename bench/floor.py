"""Throughput of GET /shipments?limit=100 against its floor, in one run (not a test).

    .venv/bin/python bench/floor.py --rounds 3 --seconds 15

On the bench database of bench/api.py (100,000 shipments): the service and bench/floor_app.py (the
same 100 rows as one json_agg, text passed through: what the hardware gives before any API work)
each under gunicorn with the same settings (2 sync workers), measured alternately, `--clients`
connections each requesting as fast as answers come for `--seconds`. Prints requests/s per round,
the medians and the ratio service/floor (the target: at least 1, docs/performance.md).
"""
import argparse
import os
import statistics
import sys
import threading
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchkit import RAISED_LIMITS, acme_id, acme_token, bench_url, run, start_gunicorn  # noqa: E402

def throughput(url, headers, clients, seconds):
    """Requests per second answered 200 by `clients` threads for `seconds`."""
    done, stop = [0] * clients, time.monotonic() + seconds

    def client(number):
        session = requests.Session()
        while time.monotonic() < stop:
            response = session.get(url, headers=headers, timeout=30)
            response.raise_for_status()
            done[number] += 1
    threads = [threading.Thread(target=client, args=(number,)) for number in range(clients)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(done) / (time.monotonic() - started)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=15)
    parser.add_argument("--clients", type=int, default=4)
    args = parser.parse_args()

    url, _server = bench_url()
    env = {**os.environ, "DATABASE_URL": url, "SHIPTRACK_RATE_LIMITS": RAISED_LIMITS}
    run("db", "init", env=env)
    token = acme_token(env, "floor")
    env["FLOOR_ORGANIZATION"] = str(acme_id(url))
    service = start_gunicorn(env, 18781, workers=2)
    floor = start_gunicorn(env, 18782, workers=2, target="floor_app:app", cwd=Path(__file__).resolve().parent,
                           probe="/shipments")
    rates = {"service": [], "floor": []}
    try:
        targets = {"service": ("http://127.0.0.1:18781/shipments?limit=100", {"Authorization": f"Bearer {token}"}),
                   "floor": ("http://127.0.0.1:18782/shipments", {})}
        for name, (target, headers) in targets.items():      # warm both (stored renderings, caches)
            throughput(target, headers, args.clients, 2)
        for round_number in range(args.rounds):
            for name, (target, headers) in targets.items():
                rate = throughput(target, headers, args.clients, args.seconds)
                rates[name].append(rate)
                print(f"round {round_number + 1}: {name:7} {rate:7.1f} requests/s", flush=True)
    finally:
        for process in (service, floor):
            process.terminate()
            process.wait()
    service_rate, floor_rate = statistics.median(rates["service"]), statistics.median(rates["floor"])
    print(f"median: service {service_rate:.1f}/s, floor {floor_rate:.1f}/s, "
          f"service/floor {service_rate / floor_rate:.2f} (target at least 1.00)")


if __name__ == "__main__":
    main()
