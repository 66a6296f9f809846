"""The SQL of a miss (a page of shipments read whole): this checkout's models/shipments.py against another commit's.

    .venv/bin/python bench/list_sql.py --before 23d7bad     # on the bench database of bench/api.py

`list_shipments` (the page with its aggregates, containers and labels: what a page of stored-rendering
misses reads) of each version, on the same connection, alternating, for page 1 of 100 and for
`GET /shipments/{id}`. Prints medians in milliseconds. Both versions must be able to read the
database's schema (run `flask db upgrade` first). Not a test: compare figures from one run.
"""
import argparse
import statistics
import subprocess
import sys
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchkit import acme_id, bench_url  # noqa: E402
from models import db  # noqa: E402
from models import shipments as current  # noqa: E402


SHOWN = ("id", "revision", "produce", "organic", "cargo", "checks", "containers", "labels")


def module_at(commit):
    """models/shipments.py as it was at `commit`, loaded under another name."""
    source = subprocess.run(["git", "show", f"{commit}:models/shipments.py"], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout
    module = types.ModuleType(f"shipments_{commit}")
    exec(compile(source, f"{commit}:models/shipments.py", "exec"), module.__dict__)
    return module


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", required=True, help="commit whose models/shipments.py is the baseline")
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    url, _server = bench_url()
    organization_id = acme_id(url)
    versions = {"before": module_at(args.before), "after": current}
    conn = db.connect(url)
    conn.autocommit = True
    page = [item["id"] for item in versions["after"].list_shipments(conn, organization_id, 100)]
    cases = {"page 1 of 100": lambda m: m.list_shipments(conn, organization_id, 100, shipment_ids=page),
             "one shipment": lambda m: [m.get_shipment(conn, organization_id, page[0])]}
    for name, case in cases.items():
        # The same values from both: the columns hold what the aggregates gave.
        shown = {version: [{key: repr(item[key]) for key in SHOWN} for item in case(module)]
                 for version, module in versions.items()}
        assert shown["before"] == shown["after"], name
        timings = {version: [] for version in versions}
        for _ in range(args.rounds):
            for version, module in versions.items():
                started = time.perf_counter()
                case(module)
                timings[version].append((time.perf_counter() - started) * 1000)
        before, after = (statistics.median(timings[version]) for version in versions)
        print(f"{name:14} median before {before:6.2f} ms, after {after:6.2f} ms ({args.rounds} rounds, alternating)")
    conn.close()


if __name__ == "__main__":
    main()
