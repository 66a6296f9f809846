"""Where one gunicorn worker's time goes under load on GET /shipments?limit=100 (py-spy; not a test).

    .venv/bin/python bench/profile_list.py --seconds 20
    .venv/bin/python bench/profile_list.py --seconds 20 --code /tmp/before   # another checkout, same way

Serves the bench database of bench/api.py (with --code, `<database>_code`, which `bench/floor.py --code DIR
--shipments N` seeded with that checkout: benchkit.code_database) from the checkout under gunicorn with 2
workers, loads it with wrk (4 connections), and samples one worker with py-spy (`--idle`: a thread waiting
for PostgreSQL counts; `--cpu`: only threads on a CPU) for `--seconds`. Each
sample of a thread serving a request is put in the first bucket whose frame it holds (a thread waiting for
work, or the worker's main loop waiting for connections, is left out); the table gives each bucket's
share of the samples of requests. Needs py-spy (`.venv/bin/pip install py-spy`, or any py-spy on PATH) and
root or ptrace rights.
"""
import argparse
import collections
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchkit import (BENCH_DB, RAISED_LIMITS, ROOT, acme_token, bench_url, code_database, run,  # noqa: E402
                      start_gunicorn)

# (bucket, what a frame of it contains), the first that matches a sample takes it: the order matters.
BUCKETS = (
    ("the statement: the wait callback polling for its answer (models/deadline.py)", ("_wait (models/deadline.py",)),
    ("the statement: the rest of execute (sending it, libpq)", ("execute (",)),
    ("taking a pooled connection (checkout, looks_alive)", ("checkout (models/db.py",)),
    ("decoding rows from the driver (fetchall, row dicts)", ("fetchall (", "fetchone (", "fetchmany (")),
    ("the guard before the view: the token's principal, the rate limits (api/guard.py)", ("guard_request (",)),
    ("joining the body and its ETag", ("list_bytes (", "list_text (", "joined (", "dumps (", "body_etag (",
                                       "stored_etag (", "md5_list_digest (")),
    ("writing the head (a sendall of its own)", ("send_headers (",)),
    ("writing the body", ("sendall (", "sendfile (")),
    ("the access log line", ("GunicornLogger.access (",)),
    ("closing the connection (gunicorn's close_graceful)", ("close_graceful (",)),
)
# A sample is a request's when one of these frames is on its stack (handle: reading it, closing its connection).
REQUEST = ("handle_request (", "JsonErrorWorker.handle (")


def classify(path):
    """{bucket: samples} of py-spy's raw output (one stack per line, `frame;frame;... count`)."""
    counts = collections.Counter()
    for line in Path(path).read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not any(marker in stack for marker in REQUEST):
            continue
        frames = stack.split(";")
        bucket = next((name for name, markers in BUCKETS
                       if any(marker in frame for frame in frames for marker in markers)),
                      "gunicorn, Flask and the rest of the request")
        counts[bucket] += int(count)
    return counts


def py_spy():
    """The virtual environment's py-spy, else the one on PATH."""
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.exists() else shutil.which("py-spy") or sys.exit("py-spy is not installed")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--code", help="another checkout to profile instead of this one")
    parser.add_argument("--database", default=BENCH_DB)
    parser.add_argument("--port", type=int, default=18791)
    parser.add_argument("--rate", type=int, default=250, help="py-spy samples per second")
    parser.add_argument("--cpu", action="store_true", help="only samples of threads on a CPU (py-spy without --idle)")
    args = parser.parse_args()

    url, server = bench_url(args.database)
    env = {**os.environ, "DATABASE_URL": url, "SHIPTRACK_RATE_LIMITS": RAISED_LIMITS}
    code = Path(args.code) if args.code else ROOT
    if args.code:   # its own database, seeded by an earlier bench/floor.py --code (benchkit.code_database)
        env["DATABASE_URL"] = code_database(server, env, args.database, code)
    else:
        run("db", "init", env=env)
    token = acme_token(env, "profile", cwd=code)
    service = start_gunicorn(env, args.port, workers=2, cwd=code,
                             stdout=subprocess.DEVNULL)   # the access log, written as bench/floor.py writes it
    target = f"http://127.0.0.1:{args.port}/shipments?limit=100"
    raw = Path(tempfile.mkdtemp()) / "samples.txt"
    try:
        wrk = ["wrk", "-c", "4", "-t", "2", "-d", f"{args.seconds + 6:g}s", "-H", f"Authorization: Bearer {token}",
               target]
        subprocess.run([*wrk[:6], "3s", *wrk[7:]], check=True, stdout=subprocess.DEVNULL)   # warm up
        load = subprocess.Popen(wrk, stdout=subprocess.PIPE, text=True)
        time.sleep(3)
        worker = int(Path(f"/proc/{service.pid}/task/{service.pid}/children").read_text().split()[0])
        subprocess.run([py_spy(), "record", *([] if args.cpu else ["--idle"]),
                        "--format", "raw",
                        "--rate", str(args.rate), "--duration", f"{args.seconds:g}", "--pid", str(worker),
                        "--output", str(raw), "--nonblocking"], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        out, _ = load.communicate()
    finally:
        service.terminate()
        service.wait()
    counts = classify(raw)
    total = sum(counts.values())
    print(next(line for line in out.splitlines() if "Requests/sec" in line).strip())
    print(f"{total} samples of requests in worker {worker} (py-spy's raw stacks: {raw})")
    print("| where | share of the worker's samples of requests |\n|---|---|")
    for name, _markers in (*BUCKETS, ("gunicorn, Flask and the rest of the request", ())):
        print(f"| {name} | {100 * counts[name] / max(total, 1):.0f} % |")


if __name__ == "__main__":
    main()
