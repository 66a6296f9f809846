"""Throughput of GET /shipments?limit=100 against its floor and its ceiling, in one run (not a test).

    .venv/bin/python bench/floor.py --shipments 20000 --database shiptrack_floor --wrk   # seed, then measure
    .venv/bin/python bench/floor.py --database shiptrack_floor --wrk --rounds 3 --seconds 8

On a bench database (bench/api.py's 100,000 shipments by default; `--shipments N` seeds `--database` first
with benchkit.seed, as bench/api.py and bench/pooled.py do): the service and bench/floor_app.py (the same 100
rows as one json_agg, text passed through: what the hardware gives before any API work, a connection per
request in flight) each under gunicorn with 2 workers and the service's own gunicorn.conf.py (its threaded
worker and 32 threads, a connection closed after each response, the access log, the deadline on each wait
for the database), measured alternately, `--clients` connections each requesting as fast as answers come
for `--seconds`. Prints requests/s per round, the medians and the ratio service/floor (docs/performance.md
has the targets), and the CPU time each gunicorn (master and workers) and the database's backends used per
request answered: figures that other programs busy on the machine change less than requests/s. Beside them,
bench/ceiling_app.py under the same gunicorn: the service's own answer held in memory and sent as it is
(what gunicorn and Flask cost; the service/ceiling ratio is the share of it the service reaches), and
after each round the p50 of `--latency` requests of the service (and of `--code`) one at a time.

Only 2xx answers count. A round that met any other answer, or a connection error, is printed in capitals,
every ratio it enters is printed INVALID, and the run exits with status 1: a floor answering 500s quickly
would otherwise make the service look slow.

With `--code DIR` a third gunicorn serves the same data from another checkout (the code before a change,
e.g. `git archive <commit> | tar -x -C DIR`), on a database of its own that the checkout seeds itself
with `--shipments` (benchkit.code_database: `<database>_code`, reused as it is without `--shipments`),
measured in turn with the others, so old and new are compared in the same run and each against the same
floor.
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

import psycopg2
import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchkit import (BENCH_DB, RAISED_LIMITS, acme_id, acme_token, bench_url, code_database, percentile,  # noqa: E402
                      run, seed, start_gunicorn)
from proc_cpu import cpu_seconds  # noqa: E402

# The floor's and the ceiling's gunicorn settings: the service's own, less its MCP server.
FLOOR_CONFIG = Path(__file__).resolve().parent / "floor_gunicorn.conf.py"


def throughput(url, headers, clients, seconds):
    """(requests per second, 2xx answers, other answers and errors) of `clients` threads for `seconds`."""
    done, failed, stop = [0] * clients, [0] * clients, time.monotonic() + seconds

    def client(number):
        session = requests.Session()
        while time.monotonic() < stop:
            try:
                ok = session.get(url, headers=headers, timeout=30).ok
            except requests.RequestException:
                ok = False
            done[number] += ok
            failed[number] += not ok
    threads = [threading.Thread(target=client, args=(number,)) for number in range(clients)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(done) / (time.monotonic() - started), sum(done), sum(failed)


def wrk_throughput(url, headers, clients, seconds):
    """throughput's figures measured by wrk (`clients` connections, 2 threads): a client costing less CPU."""
    command = ["wrk", "-c", str(clients), "-t", str(min(2, clients)), "-d", f"{seconds:g}s", "--latency", url]
    for name, value in headers.items():
        command[1:1] = ["-H", f"{name}: {value}"]
    out = subprocess.run(command, check=True, text=True, stdout=subprocess.PIPE).stdout
    answered = int(re.search(r"([0-9]+) requests in", out)[1])
    non_2xx = re.search(r"Non-2xx or 3xx responses: ([0-9]+)", out)
    errors = re.search(r"Socket errors: connect ([0-9]+), read ([0-9]+), write ([0-9]+), timeout ([0-9]+)", out)
    failed = (int(non_2xx[1]) if non_2xx else 0) + (sum(map(int, errors.groups())) if errors else 0)
    if failed:
        print(out, flush=True)
    return float(re.search(r"Requests/sec:\s+([0-9.]+)", out)[1]), answered - failed, failed


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


def backend_cpu(conn, databases):
    """{pid: CPU seconds} of the client backends connected to `databases`, the asking connection's own left out.

    Only the server loaded in a round asks the database anything, so what these backends use in a round is its.
    """
    with conn.cursor() as cur:
        cur.execute("SELECT pid FROM pg_stat_activity WHERE datname = ANY(%s) AND backend_type = 'client backend'"
                    " AND pid <> pg_backend_pid()", (list(databases),))
        return {pid: cpu_seconds(pid) or 0.0 for (pid,) in cur.fetchall()}


def start_servers(args, env, token, code_env, servers, body):
    """{name: (URL, headers)} of the service, the floor, the other checkout (with `code_env`) and the ceiling
    (its answer written to `body`), each started into `servers` ({name: gunicorn master}) as it comes."""
    ports = {"service": args.port, "floor": args.port + 1, "other": args.port + 2, "ceiling": args.port + 3}
    auth = {"Authorization": f"Bearer {token}"}
    # Every access log line (one per request) is written by all of them, to --access-log: a terminal would slow
    # the writers down and bury the figures.
    quiet = {"workers": 2, "stdout": args.access_log}
    servers["service"] = start_gunicorn(env, ports["service"], **quiet)
    # The service's gunicorn.conf.py for them too, less its MCP server (bench/floor_gunicorn.conf.py): like with like.
    servers["floor"] = start_gunicorn(env, ports["floor"], target="bench.floor_app:app", probe="/shipments",
                                      config=FLOOR_CONFIG, **quiet)
    targets = {"service": (f"http://127.0.0.1:{ports['service']}/shipments?limit=100", auth),
               "floor": (f"http://127.0.0.1:{ports['floor']}/shipments", {})}
    if code_env:
        code = Path(args.code)
        servers["other"] = start_gunicorn(code_env, ports["other"], cwd=code, **quiet)
        targets["other"] = (f"http://127.0.0.1:{ports['other']}/shipments?limit=100",
                            {"Authorization": f"Bearer {acme_token(code_env, 'floor', cwd=code)}"})
    answer = requests.get(targets["service"][0], headers=auth, timeout=30)
    answer.raise_for_status()
    body.write_bytes(answer.content)
    servers["ceiling"] = start_gunicorn({**env, "CEILING_BODY": str(body)}, ports["ceiling"],
                                       target="bench.ceiling_app:app", probe="/shipments", config=FLOOR_CONFIG, **quiet)
    targets["ceiling"] = (f"http://127.0.0.1:{ports['ceiling']}/shipments", {})
    return targets


def measure(args, servers, targets, database):
    """{name: requests/s per round}, {name: CPU ms per request of gunicorn, of PostgreSQL}, {name: p50s},
    {name: answers not 2xx}."""
    rates, cpu_ms = {name: [] for name in targets}, {name: [] for name in targets}
    pg_ms = {name: [] for name in targets}
    databases = (args.database, args.database + "_code")
    failed = dict.fromkeys(targets, 0)
    latencies = {name: [] for name in ("service", "other") if name in targets}
    for name, (target, headers) in targets.items():      # warm each (stored renderings, caches)
        failed[name] += throughput(target, headers, args.clients, 2)[2]
    for round_number in range(args.rounds):
        for name, (target, headers) in targets.items():
            cpu, backends = gunicorn_cpu(servers[name]), backend_cpu(database, databases)
            rate, answered, refused = (wrk_throughput if args.wrk else throughput)(target, headers, args.clients,
                                                                                   args.seconds)
            failed[name] += refused
            rates[name].append(rate)
            cpu_ms[name].append((gunicorn_cpu(servers[name]) - cpu) * 1000 / max(answered, 1))
            used = sum(seconds - backends.get(pid, 0.0) for pid, seconds in backend_cpu(database, databases).items())
            pg_ms[name].append(used * 1000 / max(answered, 1))
            print(f"round {round_number + 1}: {name:7} {rate:7.1f} requests/s, {cpu_ms[name][-1]:.2f} ms of gunicorn "
                  f"CPU each, {pg_ms[name][-1]:.2f} ms of PostgreSQL's", flush=True)
            if refused:
                print(f"round {round_number + 1}: {name.upper()} MET {refused} ANSWERS THAT WERE NOT 2XX OR "
                      f"CONNECTION ERRORS: THIS RUN DOES NOT COUNT", flush=True)
        for name in latencies:
            latencies[name].append(p50(*targets[name], args.latency))
            print(f"round {round_number + 1}: {name:7} p50 {latencies[name][-1]:.2f} ms one at a time", flush=True)
    return rates, (cpu_ms, pg_ms), latencies, failed


def ratio(rates, failed, numerator, denominator):
    """`numerator`'s median requests/s over `denominator`'s, or INVALID and why when either met a non-2xx."""
    spoilt = [f"{name} met {failed[name]} answers not 2xx" for name in (numerator, denominator) if failed[name]]
    if spoilt:
        return f"INVALID ({', '.join(spoilt)})"
    return f"{statistics.median(rates[numerator]) / statistics.median(rates[denominator]):.2f}"


def report(args, rates, cpu, latencies, failed):
    """The medians and ratios; False when any answer was not 2xx (the ratios it enters are INVALID)."""
    median = {name: statistics.median(values) for name, values in rates.items()}
    print(f"median: service {median['service']:.1f}/s, floor {median['floor']:.1f}/s, "
          f"service/floor {ratio(rates, failed, 'service', 'floor')} (target at least 1.80)")
    print(f"median: ceiling {median['ceiling']:.1f}/s, "
          f"service/ceiling {ratio(rates, failed, 'service', 'ceiling')} (target at least 0.25)")
    if args.code:
        print(f"median: {args.code} {median['other']:.1f}/s, its /floor {ratio(rates, failed, 'other', 'floor')}, "
              f"its /ceiling {ratio(rates, failed, 'other', 'ceiling')}; "
              f"this checkout / it {ratio(rates, failed, 'service', 'other')}")
    print("median p50 one at a time: " + ", ".join(
        f"{name} {statistics.median(values):.2f} ms" for name, values in latencies.items()))
    for whose, cpu_ms in zip(("gunicorn", "PostgreSQL"), cpu):
        print(f"median {whose} CPU per request: " + ", ".join(
            f"{name} {statistics.median(values):.2f} ms" for name, values in cpu_ms.items()))
    if any(failed.values()):
        print("THIS RUN DOES NOT COUNT: " + ", ".join(f"{name} met {count} answers not 2xx"
                                                      for name, count in failed.items() if count))
    return not any(failed.values())


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=15)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--code", help="another checkout to measure beside this one (served from --port + 2)")
    parser.add_argument("--database", default=BENCH_DB, help="the seeded bench database (bench/api.py's by default)")
    parser.add_argument("--shipments", type=int, help="seed --database with this many demo shipments first")
    parser.add_argument("--port", type=int, default=18781, help="the service's port; the floor's is the next one")
    parser.add_argument("--wrk", action="store_true", help="load with wrk instead of Python threads (the CEO's bar)")
    parser.add_argument("--latency", type=int, default=200, help="requests one at a time per round for the p50s")
    parser.add_argument("--access-log", type=argparse.FileType("ab"), default=os.devnull,
                        help="where every gunicorn's access log goes (/dev/null by default)")
    args = parser.parse_args()

    url, server = bench_url(args.database)
    env = {**os.environ, "DATABASE_URL": url, "SHIPTRACK_RATE_LIMITS": RAISED_LIMITS}
    if args.shipments:
        seed(server, env, args.shipments, args.database)
    run("db", "init", env=env)
    token = acme_token(env, "floor")
    env["FLOOR_ORGANIZATION"] = str(acme_id(url))
    code_env = None
    if args.code:   # the same data in a database of its own (benchkit.code_database)
        code_env = {**env, "DATABASE_URL": code_database(server, env, args.database, Path(args.code), args.shipments)}
    servers, body = {}, Path(f"/tmp/ceiling-{os.getpid()}.json")
    database = psycopg2.connect(url)
    database.autocommit = True
    try:
        targets = start_servers(args, env, token, code_env, servers, body)
        counted = report(args, *measure(args, servers, targets, database))
    finally:
        database.close()
        for process in servers.values():
            process.terminate()
            process.wait()
        body.unlink(missing_ok=True)
    sys.exit(0 if counted else 1)


if __name__ == "__main__":
    main()
