"""What an MCP tool call costs next to the API request it makes (README, "MCP tools").

    .venv/bin/python bench/mcp.py                  # seeds database shiptrack_bench_mcp (300 shipments), then measures
    .venv/bin/python bench/mcp.py --reuse          # measures the database seeded before

gunicorn with one worker on 127.0.0.1, one client at a time. Each round sends, for every pair, the API
request and then the same question as a `tools/call` POST to /mcp (the bytes an MCP client sends, read
whole by `requests`, so client libraries are not measured), interleaved so both see the same machine.
A first POST per worker pays the SDK's import (seconds) and is sent before measuring.
"""
import argparse
import os
import statistics
import time

import requests

from benchkit import RAISED_LIMITS, acme_token, bench_url, percentile, seed, start_gunicorn

DATABASE = "shiptrack_bench_mcp"
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
               "MCP-Protocol-Version": "2025-11-25"}


def pairs(shipment):
    """(name, API path, tool, arguments): the same question both ways."""
    return [
        ("GET /shipments/{id}", f"/shipments/{shipment}", "get_shipment", {"shipment_id": shipment}),
        ("GET /shipments?limit=25", "/shipments?limit=25", "search_shipments", {"limit": 25}),
        ("GET /shipments?q=avocado&limit=25", "/shipments?q=avocado&limit=25", "search_shipments",
         {"q": "avocado", "limit": 25}),
        ("GET /shipments/{id}/timeline", f"/shipments/{shipment}/timeline", "get_shipment_timeline",
         {"shipment_id": shipment}),
        ("GET /free_time/at_risk", "/free_time/at_risk", "list_free_time_at_risk", {}),
    ]


def timed(send):
    started = time.perf_counter()
    response = send()
    elapsed = (time.perf_counter() - started) * 1000
    assert response.status_code == 200, response.text[:300]
    return elapsed, response


def main():
    """Seed unless --reuse, then measure each pair interleaved and print medians."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shipments", type=int, default=300)
    parser.add_argument("--reuse", action="store_true", help="measure the database seeded before")
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--port", type=int, default=18766)
    args = parser.parse_args()

    url, server = bench_url(DATABASE)
    env = {**os.environ, "DATABASE_URL": url}
    if not args.reuse:
        seed(server, env, args.shipments, DATABASE)
    token = acme_token(env, "bench-mcp")
    env["SHIPTRACK_RATE_LIMITS"] = RAISED_LIMITS
    process = start_gunicorn(env, args.port, workers=1)
    base = f"http://127.0.0.1:{args.port}"
    headers = {"Authorization": f"Bearer {token}"}
    session = requests.Session()
    try:
        shipment = session.get(f"{base}/shipments?limit=1", headers=headers, timeout=30).json()["data"][0]["id"]
        cases = pairs(shipment)
        timings = {name: {"api": [], "summary": [], "full": []} for name, *_rest in cases}
        sizes = {}

        def call(tool, arguments, number):
            message = {"jsonrpc": "2.0", "id": number, "method": "tools/call",
                       "params": {"name": tool, "arguments": arguments}}
            return lambda: session.post(f"{base}/mcp", json=message, headers={**headers, **MCP_HEADERS}, timeout=60)

        for _name, _path, tool, arguments in cases:    # the SDK's import, and a warm cache for every pair
            timed(call(tool, arguments, 0))
        for number in range(args.rounds + 5):
            for name, path, tool, arguments in cases:
                api, api_response = timed(lambda: session.get(base + path, headers=headers, timeout=60))
                summary, summary_response = timed(call(tool, arguments, number))
                full, full_response = timed(call(tool, {**arguments, "full": True}, number))
                if number >= 5:                         # the first rounds warm up
                    timings[name]["api"].append(api)
                    timings[name]["summary"].append(summary)
                    timings[name]["full"].append(full)
                assert not summary_response.json()["result"]["isError"], summary_response.text[:300]
                sizes[name] = (len(api_response.content), len(summary_response.content), len(full_response.content))
        print(f"{args.rounds} rounds, interleaved; p50 (p95) in ms; response bytes API / tool summary / tool full")
        print(f"{'request':36} {'API':>14} {'tool':>14} {'tool full':>14}   bytes")
        for name, measured in timings.items():
            cells = [f"{statistics.median(values):6.1f} ({percentile(values, 0.95):5.1f})"
                     for values in (measured["api"], measured["summary"], measured["full"])]
            print(f"{name:36} {cells[0]:>14} {cells[1]:>14} {cells[2]:>14}   {' / '.join(map(str, sizes[name]))}")
    finally:
        process.terminate()
        process.wait()


if __name__ == "__main__":
    main()
