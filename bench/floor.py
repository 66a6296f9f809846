"""Throughput of GET /shipments?limit=100 against its floor, in one run (not a test).

    .venv/bin/python bench/floor.py --rounds 3 --seconds 15

On the bench database of bench/api.py (100,000 shipments): the service and bench/floor_app.py (the
same 100 rows as one json_agg, text passed through: what the hardware gives before any API work)
each under gunicorn with 2 workers (the service with gunicorn.conf.py, the floor with gunicorn's
sync worker), measured alternately, `--clients` connections each requesting as fast as answers come
for `--seconds`. Prints requests/s per round, the medians and the ratio service/floor (the target: at
least 1, docs/performance.md), and the CPU time each gunicorn (master and workers) used per request
answered: a figure that other programs busy on the machine change less than requests/s.

With `--code DIR` a third gunicorn serves the same database from another checkout (the code before a
change, e.g. `git archive <commit> | tar -x -C DIR`), measured in turn with the other two, so old and
new are compared in the same run and each against the same floor.
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

from benchkit import BENCH_DB, RAISED_LIMITS, acme_id, acme_token, bench_url, run, start_gunicorn  # noqa: E402
from proc_cpu import cpu_seconds  # noqa: E402


def throughput(url, headers, clients, seconds):
    """(requests per second, requests) answered 200 by `clients` threads for `seconds`."""
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
    return sum(done) / (time.monotonic() - started), sum(done)


def gunicorn_cpu(master):
    """CPU seconds a gunicorn master (a Popen) and its live workers have used so far."""
    workers = Path(f"/proc/{master.pid}/task/{master.pid}/children").read_text().split()
    return sum(cpu_seconds(pid) or 0.0 for pid in (master.pid, *map(int, workers)))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=15)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--code", help="another checkout to measure beside this one (served from --port + 2)")
    parser.add_argument("--database", default=BENCH_DB, help="the seeded bench database (bench/api.py's by default)")
    parser.add_argument("--port", type=int, default=18781, help="the service's port; the floor's is the next one")
    args = parser.parse_args()

    url, _server = bench_url(args.database)
    ports = {"service": args.port, "floor": args.port + 1, "other": args.port + 2}
    env = {**os.environ, "DATABASE_URL": url, "SHIPTRACK_RATE_LIMITS": RAISED_LIMITS}
    run("db", "init", env=env)
    token = acme_token(env, "floor")
    env["FLOOR_ORGANIZATION"] = str(acme_id(url))
    service = start_gunicorn(env, ports["service"], workers=2)
    floor = start_gunicorn(env, ports["floor"], workers=2, target="floor_app:app", cwd=Path(__file__).resolve().parent,
                           probe="/shipments")
    servers = {"service": service, "floor": floor}
    targets = {"service": (f"http://127.0.0.1:{ports['service']}/shipments?limit=100",
                           {"Authorization": f"Bearer {token}"}),
               "floor": (f"http://127.0.0.1:{ports['floor']}/shipments", {})}
    if args.code:
        servers["other"] = start_gunicorn(env, ports["other"], workers=2, cwd=Path(args.code))
        targets["other"] = (f"http://127.0.0.1:{ports['other']}/shipments?limit=100", targets["service"][1])
    rates, cpu_ms = {name: [] for name in targets}, {name: [] for name in targets}
    try:
        for name, (target, headers) in targets.items():      # warm both (stored renderings, caches)
            throughput(target, headers, args.clients, 2)
        for round_number in range(args.rounds):
            for name, (target, headers) in targets.items():
                cpu = gunicorn_cpu(servers[name])
                rate, answered = throughput(target, headers, args.clients, args.seconds)
                rates[name].append(rate)
                cpu_ms[name].append((gunicorn_cpu(servers[name]) - cpu) * 1000 / answered)
                print(f"round {round_number + 1}: {name:7} {rate:7.1f} requests/s, "
                      f"{cpu_ms[name][-1]:.2f} ms of gunicorn CPU each", flush=True)
    finally:
        for process in servers.values():
            process.terminate()
            process.wait()
    service_rate, floor_rate = statistics.median(rates["service"]), statistics.median(rates["floor"])
    print(f"median: service {service_rate:.1f}/s, floor {floor_rate:.1f}/s, "
          f"service/floor {service_rate / floor_rate:.2f} (target at least 1.00)")
    if args.code:
        other_rate = statistics.median(rates["other"])
        print(f"median: {args.code} {other_rate:.1f}/s, its /floor {other_rate / floor_rate:.2f}; "
              f"this checkout / it {service_rate / other_rate:.2f}")
    print("median gunicorn CPU per request: " + ", ".join(
        f"{name} {statistics.median(values):.2f} ms" for name, values in cpu_ms.items()))


if __name__ == "__main__":
    main()
