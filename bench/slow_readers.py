"""Slow readers and trickled bodies (not a test), against this checkout and the code before, in one run.

    .venv/bin/python bench/slow_readers.py --before /tmp/before    # /tmp/before: a checkout of the code before

For each front (gunicorn itself, then docs/monitoring.md's haproxy and nginx examples as each checkout
documents them) and each code, alternating: gunicorn -w 2 as the README starts it (`-c gunicorn.conf.py`),
a fresh database with one organization, a shipment and a 25 MB document file; 24 clients with a token
read the file at 64 bytes a second (4 KiB receive buffers, tests/support/slow_clients.py); then
`--rounds` probes of GET /shipments/{id} and of GET /healthz, one after the other, each waited on 5 s
at most. Prints per path the probes answered 200 within 5 s and the median time (an unanswered probe
counts as more than 5 s). Then through haproxy alone: 70 clients without a token each send 17,000 bytes
of a 65,536-byte POST /mcp body and a byte a second after, while /healthz is probed the same way.
Last, what turning gunicorn's sendfile off costs: 20 downloads of the file at full speed, the workers'
CPU per download and the median time. Only 127.0.0.1 is contacted.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchkit import RAISED_LIMITS, ROOT, bench_url, schema_database  # noqa: E402

sys.path.insert(0, str(ROOT))
from models import db  # noqa: E402
from tests.support import operations  # noqa: E402
from tests.support.factories import insert, make_org, make_shipment, make_token  # noqa: E402
from tests.support.processes import free_port, stop, wait_listening  # noqa: E402
from tests.support.slow_clients import SlowClients, SlowReaders, answered_in, trickled_body  # noqa: E402

DATABASE = "shiptrack_slow_readers_bench"
FILE_BYTES = 25 * 1000 * 1000
WITHIN = 5.0


def fresh_database(server, storage):
    """An empty bench database with the schema, an organization, a shipment and a 25 MB file: token and ids."""
    conn = schema_database(server, DATABASE)
    organization = make_org(conn, "acme")
    shipment = make_shipment(conn, organization)
    (storage / "docs").mkdir(parents=True, exist_ok=True)
    (storage / "docs" / "large.pdf").write_bytes(b"%PDF-1.7 " + b"x" * (FILE_BYTES - 9))
    document = insert(conn, "documents", organization_id=organization, shipment_id=shipment, type="packing_list",
                      filename="large.pdf", content_type="application/pdf", byte_size=FILE_BYTES,
                      storage_key="docs/large.pdf", scan_state="clean")
    token = make_token(conn, organization)
    conn.close()
    return token, shipment, document


@contextmanager
def service(code, url, storage, front, scratch):
    """gunicorn -w 2 of checkout `code`, alone or behind `front` as that checkout documents it: its base URL."""
    port = free_port()
    scratch.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "DATABASE_URL": url, "SHIPTRACK_RATE_LIMITS": RAISED_LIMITS,
           "SHIPTRACK_STORAGE_DIR": str(storage), "SHIPTRACK_TRUSTED_PROXIES": "0" if front == "direct" else "1"}
    process = subprocess.Popen([str(Path(sys.executable).parent / "gunicorn"), "-c", "gunicorn.conf.py", "-w", "2",
                                "-b", f"127.0.0.1:{port}", "--log-level", "warning", "app:create_app()"],
                               cwd=code, env=env, stdout=subprocess.DEVNULL, stderr=open(scratch / "gunicorn.log", "w"))
    try:
        wait_listening(process, port, "gunicorn", lambda: (scratch / "gunicorn.log").read_text())
        base = f"http://127.0.0.1:{port}"
        while requests.get(base + "/healthz", timeout=10).status_code != 200:
            time.sleep(0.2)
        if front == "direct":
            yield base, process
            return
        operations.ROOT = Path(code)  # the example of that checkout's docs/monitoring.md
        start = operations.haproxy if front == "haproxy" else operations.nginx
        with start(scratch, (f"127.0.0.1:{port}",) * 2) as (through, _front):
            yield through, process
    finally:
        stop(process, 30)


def probes(base, paths, rounds):
    """{path: [seconds, or None when not answered 200 within WITHIN]} over `rounds` rounds."""
    seconds = {path: [] for path in paths}
    for _ in range(rounds):
        for path, headers in paths.items():
            seconds[path].append(answered_in(base + path, headers, WITHIN))
        time.sleep(1)
    return seconds


def summary(times):
    """'answered/sent within 5 s, median' of one path's probes."""
    answered = [took for took in times if took is not None]
    ordered = sorted(took if took is not None else float("inf") for took in times)
    median = statistics.median_low(ordered)
    shown = f"{median * 1000:.0f} ms" if median != float("inf") else f"> {WITHIN:.0f} s"
    return f"{len(answered)}/{len(times)} within {WITHIN:.0f} s, median {shown}"


def worker_cpu(master):
    """CPU seconds (user + system) of `master`'s children so far."""
    total = 0.0
    for pid in Path(f"/proc/{master.pid}/task/{master.pid}/children").read_text().split():
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", required=True, help="a checkout of the code to compare with")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--readers", type=int, default=24)
    parser.add_argument("--fronts", default="direct,haproxy,nginx")
    args = parser.parse_args()
    url, server = bench_url(DATABASE)
    scratch = Path(os.environ.get("TMPDIR", "/tmp")) / f"slow-readers-{os.getpid()}"
    storage = scratch / "storage"
    token, shipment, document = fresh_database(server, storage)
    try:
        compare({"after": str(ROOT), "before": args.before}, url, scratch, args, {"token": token,
                "shipment": shipment, "document": document})
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        admin = db.connect(server)
        admin.autocommit = True
        with admin.cursor() as cur:
            cur.execute(f'DROP DATABASE IF EXISTS "{DATABASE}" WITH (FORCE)')
        admin.close()


def compare(codes, url, scratch, args, data):
    """Each measure of the docstring, for each code in turn; one line each."""
    storage = scratch / "storage"
    token, shipment, document = data["token"], data["shipment"], data["document"]
    headers = {"Authorization": f"Bearer {token}"}
    for front in args.fronts.split(","):
        for name, code in codes.items():
            with service(code, url, storage, front, scratch / name / front) as (base, _master):
                address = base.removeprefix("http://")
                host, port = address.split(":")
                request = (f"GET /documents/doc_{document}/file HTTP/1.1\r\nHost: {address}\r\n"
                           f"Authorization: Bearer {token}\r\n\r\n").encode()
                with SlowReaders((host, int(port)), request, args.readers):
                    time.sleep(3)
                    seconds = probes(base, {f"/shipments/shp_{shipment}": headers, "/healthz": {}}, args.rounds)
            print(f"{front:8} {name:10} {args.readers} slow readers: "
                  + "; ".join(f"{path} {summary(times)}" for path, times in seconds.items()), flush=True)
    for name, code in codes.items():
        with service(code, url, storage, "haproxy", scratch / name / "trickle") as (base, _master):
            host, port = base.removeprefix("http://").split(":")
            with SlowClients((host, int(port)), [trickled_body()] * 70):
                time.sleep(2)
                seconds = probes(base, {"/healthz": {}}, 2 * args.rounds)
        print(f"haproxy  {name:10} 70 trickled bodies: /healthz {summary(seconds['/healthz'])}", flush=True)
    for name, code in codes.items():
        with service(code, url, storage, "direct", scratch / name / "download") as (base, master):
            took, cpu = [], worker_cpu(master)
            for _ in range(20):
                started = time.monotonic()
                assert len(requests.get(f"{base}/documents/doc_{document}/file", headers=headers,
                                        timeout=60).content) == FILE_BYTES
                took.append(time.monotonic() - started)
            cpu = (worker_cpu(master) - cpu) / 20
        print(f"download {name:10} 25 MB at full speed: workers' CPU {cpu * 1000:.0f} ms per download, "
              f"median {statistics.median(took) * 1000:.0f} ms", flush=True)


if __name__ == "__main__":
    main()
