"""What a GET /metrics costs as dead gunicorn workers' metric files pile up (not a test).

    .venv/bin/python bench/metric_files.py --database shiptrack_bench --rounds 5

The service under gunicorn with the project's gunicorn.conf.py (one worker) and a metrics folder of
the bench's own. The worker answers every documented GET once with a token and once without (a 401),
so its counter and histogram files hold a label set per route and status, as a busy worker's do. Each
round then gives the folder the files of 0, 10, 100 and 1,000 dead workers in turn (copies of the live
worker's two files under pids no process has: what a worker killed, or replaced on a reload, leaves) and
times `--scrapes` GET /metrics at each. A worker that dies leaves its files to be summed at every scrape
until the master restarts (gunicorn.conf.py empties the folder at start). Prints the median per count.
"""
import argparse
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchkit import RAISED_LIMITS, acme_token, bench_url, start_service  # noqa: E402

PORT = 18793
DEAD = (0, 10, 100, 1000)
# No process has a pid this high (Linux's pid_max is at most 2**22).
FIRST_DEAD_PID = 2**23


def serve_every_route(base, token):
    """One GET of every documented path with the token and one without; path ids of a shipment and a document."""
    headers = {"Authorization": f"Bearer {token}"}
    shipment = requests.get(f"{base}/shipments?limit=1", headers=headers, timeout=30).json()["data"][0]["id"]
    paths = requests.get(f"{base}/openapi.json", timeout=30).json()["paths"]
    for path, operations in paths.items():
        if "get" not in operations:
            continue
        url = base + re.sub(r"\{[a-z_]+_id\}", "doc_1", path.replace("{shipment_id}", shipment))
        for sent in (headers, {}):
            requests.get(url, headers=sent, timeout=30)


def give_dead(folder, live, count):
    """Make the folder hold the files of exactly `count` dead workers (copies of the live worker's files)."""
    for path in folder.glob("*.db"):
        pid = int(path.stem.rsplit("_", 1)[1])
        if pid >= FIRST_DEAD_PID + count:
            path.unlink()
    for pid in range(FIRST_DEAD_PID, FIRST_DEAD_PID + count):
        for kind, source in live.items():
            target = folder / f"{kind}_{pid}.db"
            if not target.exists():
                shutil.copyfile(source, target)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database", default="shiptrack_bench", help="a database with the demo data")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--scrapes", type=int, default=5)
    args = parser.parse_args()
    url, _server = bench_url(args.database)
    folder = Path(tempfile.mkdtemp(prefix="shiptrack-metric-files-"))
    env = {**os.environ, "DATABASE_URL": url, "SHIPTRACK_RATE_LIMITS": RAISED_LIMITS,
           "PROMETHEUS_MULTIPROC_DIR": str(folder)}
    token = acme_token(env, "metric files")
    process = start_service(env, PORT, 1)
    base = f"http://127.0.0.1:{PORT}"
    timings = {count: [] for count in DEAD}
    try:
        serve_every_route(base, token)
        requests.get(f"{base}/metrics", timeout=30).raise_for_status()
        live = {kind: next(folder.glob(f"{kind}_[0-9]*.db")) for kind in ("counter", "histogram")}
        series = sum(1 for line in requests.get(f"{base}/metrics", timeout=30).text.splitlines()
                     if line.startswith("shiptrack_http_"))
        sizes = ", ".join(f"{path.name} {path.stat().st_size} bytes" for path in live.values())
        print(f"the live worker's files: {sizes}; {series} shiptrack_http_ samples in a scrape", flush=True)
        for _round in range(args.rounds):
            for count in DEAD:
                give_dead(folder, live, count)
                for _ in range(args.scrapes):
                    started = time.perf_counter()
                    requests.get(f"{base}/metrics", timeout=120).raise_for_status()
                    timings[count].append((time.perf_counter() - started) * 1000)
    finally:
        process.terminate()
        process.wait()
        shutil.rmtree(folder, ignore_errors=True)
    for count in DEAD:
        median = statistics.median(timings[count])
        print(f"{count:5} dead workers ({2 * count + 2:5} files): GET /metrics median {median:8.1f} ms "
              f"({len(timings[count])} scrapes over {args.rounds} rounds)")


if __name__ == "__main__":
    main()
