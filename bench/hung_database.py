"""A database that accepts connections and never answers, or (--slow) one that answers every round trip late.

    .venv/bin/python bench/hung_database.py                     # this checkout
    .venv/bin/python bench/hung_database.py --code /work/main   # another checkout, same script
    .venv/bin/python bench/hung_database.py --slow 1.5          # each byte 1.5 s late each way

gunicorn as the README starts it (`-c gunicorn.conf.py -w 2`), its database behind a TCP proxy on
127.0.0.1 (tests/support/tcp_proxy.py) that is switched from forwarding to hanging: every byte held
both ways, connections still accepted. Prints: `/openapi.json` at the start of the hang, the time 40
`GET /organization` from 8 clients take in total (and their statuses), `/openapi.json`, `/docs`,
`/healthz` and `/readyz` after them, then the seconds from switching back to forwarding to the
first 200. Not a test (tests/database/test_hung_database.py asserts the same, bounded generously).

With `--slow SECONDS` the proxy delays every byte instead (a round trip 2 x SECONDS longer; a new
connection then needs two of them, over the 5 s connect timeout when SECONDS is 1.5): 8 clients send
`GET /organization` for `--seconds` while `/readyz` is checked every second, as a balancer does.
Prints the statuses, the median and slowest of the 200s, and /readyz's statuses (tests/database/
test_slow_database.py asserts the same on fewer requests).
"""
import argparse
import os
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests
from psycopg2.extensions import parse_dsn

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchkit import RAISED_LIMITS, ROOT, bench_url, schema_database  # noqa: E402

sys.path.insert(0, str(ROOT))
from tests.support.factories import make_org, make_token  # noqa: E402
from tests.support.processes import free_port, stop, wait_listening  # noqa: E402
from tests.support.tcp_proxy import TcpProxy  # noqa: E402

DATABASE = "shiptrack_hung_bench"


def fresh_database(server):
    """An empty bench database with the schema, an organization and a token; the token."""
    conn = schema_database(server, DATABASE)
    token = make_token(conn, make_org(conn, "acme"))
    conn.close()
    return token


def timed_get(url, **kwargs):
    """(seconds, response) of one GET."""
    started = time.monotonic()
    response = requests.get(url, timeout=120, **kwargs)
    return time.monotonic() - started, response


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--code", default=str(ROOT), help="the checkout whose service runs (default: this one)")
    parser.add_argument("--slow", type=float, default=0.0, help="delay each byte this many seconds, each way")
    parser.add_argument("--seconds", type=float, default=60.0, help="how long the 8 clients ask (--slow)")
    args = parser.parse_args()
    url, server = bench_url(DATABASE)
    headers = {"Authorization": f"Bearer {fresh_database(server)}"}
    target = parse_dsn(url)
    proxy = TcpProxy((target.get("host") or "127.0.0.1", int(target.get("port") or 5432))).start()
    port = free_port()
    env = {**os.environ, "DATABASE_URL": proxy.url(url), "SHIPTRACK_RATE_LIMITS": RAISED_LIMITS}
    service = subprocess.Popen([str(Path(sys.executable).parent / "gunicorn"), "-c", "gunicorn.conf.py", "-w", "2",
                                "-b", f"127.0.0.1:{port}", "--log-level", "warning", "app:create_app()"],
                               cwd=args.code, env=env, stdout=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_listening(service, port, "gunicorn", lambda: "")
        for _ in range(8):  # both workers hold a pooled connection
            assert requests.get(base + "/organization", headers=headers, timeout=10).status_code == 200
        if args.slow:
            return slow(proxy, base, headers, args.slow, args.seconds)
        proxy.hang()
        seconds, response = timed_get(base + "/openapi.json")
        print(f"hung: /openapi.json first {seconds:.2f} s ({response.status_code})", flush=True)
        started = time.monotonic()
        with ThreadPoolExecutor(8) as clients:
            answers = list(clients.map(lambda _: timed_get(base + "/organization", headers=headers), range(40)))
        total = time.monotonic() - started
        statuses = Counter((r.status_code, r.headers.get("Content-Type"), r.headers.get("Retry-After"))
                           for _s, r in answers)
        print(f"hung: 40 requests from 8 clients {total:.1f} s in total, slowest {max(s for s, _r in answers):.1f} s;"
              f" {dict(statuses)}", flush=True)
        for path in ("/openapi.json", "/docs", "/healthz", "/readyz"):
            seconds, response = timed_get(base + path)
            print(f"hung: {path} {seconds:.2f} s ({response.status_code})", flush=True)
        proxy.forward()
        back = time.monotonic()
        while True:
            _s, response = timed_get(base + "/organization", headers=headers)
            if response.status_code == 200:
                break
            time.sleep(0.2)
        print(f"forwarding again: first 200 after {time.monotonic() - back:.1f} s", flush=True)
    finally:
        stop(service, 30)
        proxy.stop()


def slow(proxy, base, headers, latency, seconds):
    """8 clients and a balancer's /readyz each second, for `seconds`, on a database `latency` s away each way."""
    proxy.delay(latency)
    until = time.monotonic() + seconds
    readiness = []

    def client(_):
        answers = []
        while time.monotonic() < until:
            answers.append(timed_get(base + "/organization", headers=headers))
        return answers

    def balancer():
        while time.monotonic() < until:
            readiness.append(timed_get(base + "/readyz"))
            time.sleep(1.0)
    with ThreadPoolExecutor(9) as pool:
        checker = pool.submit(balancer)
        answers = [answer for answers in pool.map(client, range(8)) for answer in answers]
        checker.result()
    statuses = Counter(r.status_code for _s, r in answers)
    times = sorted(s for s, r in answers if r.status_code == 200)
    median = f"{times[len(times) // 2]:.1f}" if times else "-"
    print(f"slow ({latency:g} s each way): {len(answers)} requests from 8 clients in {seconds:g} s: {dict(statuses)};"
          f" 200s median {median} s, slowest {max(times, default=0):.1f} s", flush=True)
    ready = Counter(r.status_code for _s, r in readiness)
    print(f"slow: /readyz {dict(ready)}, median {sorted(s for s, _r in readiness)[len(readiness) // 2]:.1f} s",
          flush=True)


if __name__ == "__main__":
    main()
