"""Where the CPU of one GET /shipments?limit=100 goes, direct and through PgBouncer in transaction mode.

    .venv/bin/python bench/pooled.py --shipments 5000 --rounds 1 --seconds 1   # seed its database once
    .venv/bin/python bench/pooled_cpu.py --requests 400 --rounds 4
    .venv/bin/python bench/pooled_cpu.py --code /tmp/before     # another checkout's direct and pooled beside

bench/pooled.py's database (or `--database`) and services (`direct`, `form`: direct in the transaction
pooler's form, `pooled`: through Debian's PgBouncer in transaction mode, `found`: through it undeclared),
each under gunicorn with one worker, asked one request at a time; with `--code DIR`, that checkout's
`direct` and `pooled` too, on its own database (seeded by `bench/pooled.py --code DIR`:
benchkit.code_database), in the same rounds. Per request, in milliseconds of CPU (user + system, from
/proc): the gunicorn worker, the PostgreSQL server's processes (the children of the postmaster serving the
bench database), PgBouncer, and this client; medians over the rounds. Throughput on two cores follows from
the sum: bench/pooled.py measures it. Not a test.
"""
import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import psycopg2
import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchkit import RAISED_LIMITS, ROOT, acme_token, bench_url, code_database, run, start_gunicorn  # noqa: E402
from pooled import DATABASE, service_envs  # noqa: E402
from proc_cpu import cpu_seconds  # noqa: E402

sys.path.insert(0, str(ROOT))
from tests.support.pgbouncer import PgBouncer  # noqa: E402

PARTS = ("worker", "postgres", "pgbouncer", "client")


def children(pid):
    """The ids of the live child processes of `pid`."""
    found = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return [int(each) for each in found.split()]


def postmaster(url):
    """The id of the postmaster serving `url` (the parent of a backend); it must run on this machine."""
    conn = psycopg2.connect(url)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT pg_backend_pid()")
            backend = cur.fetchone()[0]
    finally:
        conn.close()
    return int(Path(f"/proc/{backend}/stat").read_text().rsplit(")", 1)[1].split()[1])


def own_cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def measure(session, url, headers, count, worker_pids, server_pid, bouncer_pid):
    """Wall and CPU milliseconds per request of `count` requests, by part."""
    def sample():
        return {"worker": sum(cpu_seconds(pid) or 0.0 for pid in worker_pids),
                "postgres": sum(cpu_seconds(pid) or 0.0 for pid in children(server_pid)),
                "pgbouncer": cpu_seconds(bouncer_pid) or 0.0, "client": own_cpu()}
    before, started = sample(), time.monotonic()
    for _ in range(count):
        session.get(url, headers=headers, timeout=30).raise_for_status()
    wall, after = time.monotonic() - started, sample()
    return {"wall": wall / count * 1000, **{part: (after[part] - before[part]) / count * 1000 for part in PARTS}}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--database", default=DATABASE, help="the bench database (bench/pooled.py's by default)")
    parser.add_argument("--code", help="another checkout whose direct and pooled are measured beside these")
    args = parser.parse_args()

    url, server = bench_url(args.database)
    env = {**os.environ, "DATABASE_URL": url, "SHIPTRACK_RATE_LIMITS": RAISED_LIMITS}
    run("db", "init", env=env)
    token = {"Authorization": f"Bearer {acme_token(env, 'pooled-cpu')}"}
    bouncer = PgBouncer(server, "transaction").start()
    services = {name: (port, service_env)
                for (name, service_env), port in zip(service_envs(env, bouncer, url).items(), (18794, 18795, 18796, 18789))}
    code, headers = {name: ROOT for name in services}, {name: token for name in services}
    if args.code:   # its own database, seeded by an earlier bench/pooled.py --code (benchkit.code_database)
        code_url = code_database(server, env, args.database, Path(args.code))
        services.update({"direct (code)": (18797, {**env, "DATABASE_URL": code_url}),
                         "pooled (code)": (18798, {**services["pooled"][1], "DATABASE_URL": bouncer.url(code_url)})})
        code.update({"direct (code)": Path(args.code), "pooled (code)": Path(args.code)})
        code_token = acme_token(services["direct (code)"][1], "pooled-cpu", cwd=Path(args.code))
        code_token = {"Authorization": f"Bearer {code_token}"}
        headers.update({"direct (code)": code_token, "pooled (code)": code_token})
    masters, server_pid, session = {}, postmaster(url), requests.Session()
    results = {name: [] for name in services}
    try:
        for name, (port, service_env) in services.items():
            masters[name] = start_gunicorn(service_env, port, workers=1, cwd=code[name], stdout=subprocess.DEVNULL)
        targets = {name: f"http://127.0.0.1:{port}/shipments?limit=100" for name, (port, _env) in services.items()}
        for name, target in targets.items():  # warm every one (stored renderings, caches, plans)
            for _ in range(30):
                session.get(target, headers=headers[name], timeout=30).raise_for_status()
        for round_number in range(args.rounds):
            for name, target in targets.items():
                figures = measure(session, target, headers[name], args.requests, children(masters[name].pid),
                                  server_pid, bouncer.process.pid)
                results[name].append(figures)
                print(f"round {round_number + 1}: {name:13} " + _line(figures), flush=True)
    finally:
        for master in masters.values():
            master.terminate()
            master.wait()
        bouncer.close()
    for name, rounds in results.items():
        print(f"median: {name:13} " + _line({key: statistics.median(each[key] for each in rounds)
                                            for key in ("wall", *PARTS)}))


def _line(figures):
    return f"wall {figures['wall']:5.2f} ms; CPU " + ", ".join(f"{part} {figures[part]:4.2f}" for part in PARTS)


if __name__ == "__main__":
    main()
