"""CPU per webhook request of the sender alone (not a test): `Sender.send` from 16 threads to the
local HTTPS receiver of bench/webhooks.py, no database, no delivery loop.

    .venv/bin/python bench/sender.py                          # 4 rounds of 6,000 requests
    .venv/bin/python bench/sender.py --code /tmp/wt           # the sender of another checkout

Each round sends `--requests` signed requests (a 1.5 KB body) spread over three endpoints, after
300 to warm the kept-alive connections, and prints this process's CPU time per request
(`time.process_time()`, all threads) and the rate. The receiver runs in its own process and is
not counted. Only 127.0.0.1 is contacted.
"""
import argparse
import concurrent.futures
import os
import statistics
import sys
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT))

from bench import webhook_receiver  # noqa: E402

THREADS = 16
BODY = b'{"type":"shipment.status_changed","data":{"object":{"id":"shp_1","notes":"' + b"x" * 1500 + b'"}}}'


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=6000)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--code", default=str(PROJECT), help="checkout whose delivery/sender.py is measured")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(args.code).resolve()))
    for name in [name for name in sys.modules if name == "delivery" or name.startswith("delivery.")]:
        del sys.modules[name]
    from delivery import signing
    from delivery.sender import Sender

    receiver, _control, ports, bundle = webhook_receiver.start()
    sender = Sender(ca_bundle=bundle, allowed_networks=["127.0.0.1/32"], service_domain=None, workers=THREADS)
    urls = [f"https://127.0.0.1:{ports[name]}/{name}" for name in ("fast-a", "fast-b", "fast-c")]
    secret = signing.new_secret()

    def send(number):
        outcome = sender.send(urls[number % 3], secret, f"msg_{number}", BODY, time.time())
        if not outcome.succeeded:
            raise SystemExit(f"request {number} failed: {outcome.error}")

    print(f"{sys.modules[Sender.__module__].__file__}, {THREADS} threads, {args.requests} requests per round")
    costs = []
    try:
        with concurrent.futures.ThreadPoolExecutor(THREADS) as pool:
            list(pool.map(send, range(300)))
            for number in range(args.rounds):
                cpu, wall = time.process_time(), time.monotonic()
                list(pool.map(send, range(args.requests)))
                cpu, wall = time.process_time() - cpu, time.monotonic() - wall
                costs.append(1000 * cpu / args.requests)
                print(f"  round {number + 1}: {costs[-1]:.3f} ms CPU per request, {args.requests / wall:.0f} requests/s")
        print(f"median {statistics.median(costs):.3f} ms CPU per request")
    finally:
        sender.close()
        receiver.terminate()
        os.unlink(bundle)


if __name__ == "__main__":
    main()
