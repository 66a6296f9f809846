"""A probe's wait behind clients that keep their connection open after their answer (not a test).

    .venv/bin/python bench/lingering_clients.py --database shiptrack_bench --clients 4 --rounds 3

Two instances under the project's gunicorn.conf.py, one worker each: the project's worker
(serving.JsonErrorWorker) and gunicorn's own gthread worker (`-k gthread`, 32 threads too). In each
round, for each instance in turn: `--clients` connections each send `GET /healthz`, read the whole
answer and then neither send nor close; a new connection then asks `GET /healthz` and is timed; then
the lingering connections close. gunicorn closes a connection gracefully after its answer (it shuts
its side and waits up to 2 s for the client's close): gthread does that in the loop that accepts
and hands out every connection, serving.py in the request's own thread. Prints the probe's time per
round the time until every lingering client had its answer and the probe's time after them, and the medians.
"""
import argparse
import os
import socket
import statistics
import sys
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchkit import bench_url, start_service  # noqa: E402

WORKERS = {"serving.JsonErrorWorker": (18794, ()), "gthread": (18795, ("-k", "gthread"))}
REQUEST = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


def linger(port):
    """A connection that has sent GET /healthz and read its whole answer, left open."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(REQUEST)
    received = b""
    while b"\r\n\r\n" not in received:
        received += sock.recv(65536)
    head, _, body = received.partition(b"\r\n\r\n")
    lengths = [line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")]
    length = int(lengths[0])
    while len(body) < length:
        body += sock.recv(65536)
    return sock


def probe_behind(port, clients):
    """(seconds the lingering clients took to be answered, seconds a new connection's GET /healthz took after
    them while they stay open)."""
    started = time.perf_counter()
    lingering = [linger(port) for _ in range(clients)]
    try:
        answered = time.perf_counter()
        requests.get(f"http://127.0.0.1:{port}/healthz", timeout=60).raise_for_status()
        return answered - started, time.perf_counter() - answered
    finally:
        for sock in lingering:
            sock.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database", default="shiptrack_bench", help="any database of the service")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    url, _server = bench_url(args.database)
    env = {**os.environ, "DATABASE_URL": url}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)  # each instance makes its own (gunicorn.conf.py)
    processes = {name: start_service(env, port, 1, options) for name, (port, options) in WORKERS.items()}
    waits = {name: [] for name in WORKERS}
    try:
        for round_number in range(args.rounds):
            for name, (port, _options) in WORKERS.items():
                waits[name].append(probe_behind(port, args.clients))
                time.sleep(2.5 * args.clients)  # every graceful close of the round over
            shown = ", ".join(f"{name} {answered:.3f} s and {probe:.3f} s"
                              for name, [*_earlier, (answered, probe)] in waits.items())
            print(f"round {round_number + 1}: the lingering clients answered, then the probe: {shown}", flush=True)
    finally:
        for process in processes.values():
            process.terminate()
            process.wait()
    for name, values in waits.items():
        answered, probe = (statistics.median(value[index] for value in values) for index in (0, 1))
        print(f"{name:24} medians over {len(values)} rounds: {args.clients} lingering clients answered in "
              f"{answered:.3f} s, then the probe in {probe:.3f} s")


if __name__ == "__main__":
    main()
