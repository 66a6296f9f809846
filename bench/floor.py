"""Throughput of GET /shipments?limit=100 against its floor, in one run (not a test).

    .venv/bin/python bench/floor.py --rounds 3 --seconds 15

On the bench database of bench/api.py (100,000 shipments): the service and bench/floor_app.py (the
same 100 rows as one json_agg, text passed through: what the hardware gives before any API work)
each under gunicorn with 2 workers (the service with gunicorn.conf.py, the floor with gunicorn's
sync worker), measured alternately, `--clients` connections each requesting as fast as answers come
for `--seconds`. Prints requests/s per round, the medians and the ratio service/floor (the target: at
least 1.5, docs/performance.md), and the CPU time each gunicorn (master and workers) used per request
answered: a figure that other programs busy on the machine change less than requests/s. Beside them,
bench/ceiling_app.py under the same gunicorn: the service's own answer held in memory and sent as it is
(what gunicorn and Flask cost; the service/ceiling ratio is the share of it the service reaches), and
after each round the p50 of `--latency` requests of the service (and of `--code`) one at a time.

With `--code DIR` a third gunicorn serves a copy of the same database from another checkout (the code
before a change, e.g. `git archive <commit> | tar -x -C DIR`), measured in turn with the others, so old
and new are compared in the same run and each against the same floor.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchkit import (BENCH_DB, RAISED_LIMITS, acme_id, acme_token, bench_url, copy_database, percentile,  # noqa: E402
                      run, start_gunicorn)
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


def wrk_throughput(url, headers, clients, seconds):
    """throughput's figures measured by wrk (`clients` connections, 2 threads): a client costing less CPU."""
    command = ["wrk", "-c", str(clients), "-t", str(min(2, clients)), "-d", f"{seconds:g}s", "--latency", url]
    for name, value in headers.items():
        command[1:1] = ["-H", f"{name}: {value}"]
    out = subprocess.run(command, check=True, text=True, stdout=subprocess.PIPE).stdout
    if "Non-2xx" in out or "Socket errors" in out:
        raise SystemExit(f"wrk saw errors:\n{out}")
    answered = int(re.search(r"([0-9]+) requests in", out)[1])
    return float(re.search(r"Requests/sec:\s+([0-9.]+)", out)[1]), answered


def p50(url, headers, count):
    """The median time in ms of `count` requests one at a time on one connection."""
    session, times = requests.Session(), []
    for _ in range(count):
        started = time.perf_counter()
        session.get(url, headers=headers, timeout=30).raise_for_status()
        times.append((time.perf_counter() - started) * 1000)
    return percentile(times, 0.5)


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
    parser.add_argument("--wrk", action="store_true", help="load with wrk instead of Python threads (the CEO's bar)")
    parser.add_argument("--latency", type=int, default=200, help="requests one at a time per round for the p50s")
    args = parser.parse_args()

    url, server = bench_url(args.database)
    ports = {"service": args.port, "floor": args.port + 1, "other": args.port + 2, "ceiling": args.port + 3}
    env = {**os.environ, "DATABASE_URL": url, "SHIPTRACK_RATE_LIMITS": RAISED_LIMITS}
    run("db", "init", env=env)
    token = acme_token(env, "floor")
    env["FLOOR_ORGANIZATION"] = str(acme_id(url))
    if args.code:   # the same data, its stored renderings its own (benchkit.copy_database)
        code_env = {**env, "DATABASE_URL": copy_database(server, args.database, args.database + "_code")}
    service = start_gunicorn(env, ports["service"], workers=2)
    floor = start_gunicorn(env, ports["floor"], workers=2, target="floor_app:app", cwd=Path(__file__).resolve().parent,
                           probe="/shipments")
    servers = {"service": service, "floor": floor}
    targets = {"service": (f"http://127.0.0.1:{ports['service']}/shipments?limit=100",
                           {"Authorization": f"Bearer {token}"}),
               "floor": (f"http://127.0.0.1:{ports['floor']}/shipments", {})}
    if args.code:
        servers["other"] = start_gunicorn(code_env, ports["other"], workers=2, cwd=Path(args.code))
        targets["other"] = (f"http://127.0.0.1:{ports['other']}/shipments?limit=100", targets["service"][1])
    body = Path(f"/tmp/ceiling-{os.getpid()}.json")
    body.write_bytes(requests.get(targets["service"][0], headers=targets["service"][1], timeout=30).content)
    servers["ceiling"] = start_gunicorn({**env, "CEILING_BODY": str(body)}, ports["ceiling"], workers=2,
                                       target="ceiling_app:app", cwd=Path(__file__).resolve().parent, probe="/shipments")
    targets["ceiling"] = (f"http://127.0.0.1:{ports['ceiling']}/shipments", {})
    rates, cpu_ms = {name: [] for name in targets}, {name: [] for name in targets}
    latencies = {name: [] for name in ("service", "other") if name in targets}
    try:
        for name, (target, headers) in targets.items():      # warm both (stored renderings, caches)
            throughput(target, headers, args.clients, 2)
        for round_number in range(args.rounds):
            for name, (target, headers) in targets.items():
                cpu = gunicorn_cpu(servers[name])
                rate, answered = (wrk_throughput if args.wrk else throughput)(target, headers, args.clients,
                                                                              args.seconds)
                rates[name].append(rate)
                cpu_ms[name].append((gunicorn_cpu(servers[name]) - cpu) * 1000 / answered)
                print(f"round {round_number + 1}: {name:7} {rate:7.1f} requests/s, "
                      f"{cpu_ms[name][-1]:.2f} ms of gunicorn CPU each", flush=True)
            for name in latencies:
                latencies[name].append(p50(*targets[name], args.latency))
                print(f"round {round_number + 1}: {name:7} p50 {latencies[name][-1]:.2f} ms one at a time", flush=True)
    finally:
        for process in servers.values():
            process.terminate()
            process.wait()
        body.unlink()
    service_rate, floor_rate = statistics.median(rates["service"]), statistics.median(rates["floor"])
    print(f"median: service {service_rate:.1f}/s, floor {floor_rate:.1f}/s, "
          f"service/floor {service_rate / floor_rate:.2f} (target at least 1.50)")
    ceiling_rate = statistics.median(rates["ceiling"])
    print(f"median: ceiling {ceiling_rate:.1f}/s, service/ceiling {service_rate / ceiling_rate:.2f} (target at least 0.30)")
    if args.code:
        other_rate = statistics.median(rates["other"])
        print(f"median: {args.code} {other_rate:.1f}/s, its /floor {other_rate / floor_rate:.2f}, its /ceiling "
              f"{other_rate / ceiling_rate:.2f}; this checkout / it {service_rate / other_rate:.2f}")
    print("median p50 one at a time: " + ", ".join(
        f"{name} {statistics.median(values):.2f} ms" for name, values in latencies.items()))
    print("median gunicorn CPU per request: " + ", ".join(
        f"{name} {statistics.median(values):.2f} ms" for name, values in cpu_ms.items()))


if __name__ == "__main__":
    main()
