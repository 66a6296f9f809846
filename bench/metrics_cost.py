"""What recording metrics costs the list page: metrics on against off, in one run, interleaved (not a test).

    .venv/bin/python bench/metrics_cost.py --rounds 6 --seconds 10

Two instances of the service under gunicorn with the project's gunicorn.conf.py (2 sync workers, the
access log on, to a pipe nobody reads but the OS), one with SHIPTRACK_METRICS_ENABLED=false, on the same
database. Rounds alternate which goes first (on, off, off, on, ...) so that drift on a shared machine
falls on both. Each round, `--clients` connections ask GET /shipments?limit=100 as fast as answers
come for `--seconds`. Prints requests/s per round, the medians and the ratio on/off (the target:
at least 0.97, metrics cost at most 3 %).
"""
import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import psycopg2
import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchkit import RAISED_LIMITS, ROOT, acme_token, bench_url, seed  # noqa: E402
from floor import throughput  # noqa: E402

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


def start(env, port):
    """The service with gunicorn.conf.py on 127.0.0.1:port, once /healthz answers."""
    process = subprocess.Popen([str(Path(sys.executable).parent / "gunicorn"), "-c", "gunicorn.conf.py", "-w", "2",
                                "-b", f"127.0.0.1:{port}", "--log-level", "warning", "app:create_app()"],
                               cwd=ROOT, env=env, stdout=subprocess.DEVNULL)
    for _ in range(150):
        try:
            if requests.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return process
        except requests.RequestException:
            pass
        time.sleep(0.2)
    process.kill()
    raise SystemExit("gunicorn did not start")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--shipments", type=int, default=2000, help="demo shipments to seed a new database with")
    parser.add_argument("--database", default="shiptrack_metrics_bench")
    args = parser.parse_args()

    url, server = bench_url(args.database)
    env = {**os.environ, "DATABASE_URL": url, "SHIPTRACK_RATE_LIMITS": RAISED_LIMITS}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)  # each instance makes its own (gunicorn.conf.py)
    if not has_demo(url):
        seed(server, env, args.shipments, database=args.database)
    token = acme_token(env, "metrics cost")
    processes = {name: start({**env, "SHIPTRACK_METRICS_ENABLED": "true" if name == "on" else "false"}, port)
                 for name, port in PORTS.items()}
    headers = {"Authorization": f"Bearer {token}"}
    targets = {name: f"http://127.0.0.1:{port}/shipments?limit=100" for name, port in PORTS.items()}
    rates = {"on": [], "off": []}
    try:
        for name in ("on", "off"):  # warm both (stored renderings, pools, prepared statements)
            throughput(targets[name], headers, args.clients, 2)
        for round_number in range(args.rounds):
            order = ("on", "off") if round_number % 2 == 0 else ("off", "on")
            for name in order:
                rate = throughput(targets[name], headers, args.clients, args.seconds)
                rates[name].append(rate)
                print(f"round {round_number + 1}: metrics {name:3} {rate:7.1f} requests/s", flush=True)
        scrape = requests.get(f"http://127.0.0.1:{PORTS['on']}/metrics", timeout=10).text
        counted = [line for line in scrape.splitlines() if line.startswith("shiptrack_http_requests_total{")]
        print("counted by the instance with metrics on:", *counted, sep="\n  ")
    finally:
        for process in processes.values():
            process.terminate()
            process.wait()
    on, off = statistics.median(rates["on"]), statistics.median(rates["off"])
    print(f"median: metrics on {on:.1f}/s, off {off:.1f}/s, on/off {on / off:.3f} "
          f"(cost {100 * (1 - on / off):.1f} %; target: at most 3 %)")


if __name__ == "__main__":
    main()
