"""Throughput of GET /shipments?limit=100 direct and through PgBouncer in transaction mode, in one run.

    .venv/bin/python bench/pooled.py --shipments 5000 --rounds 3 --seconds 10   # seed, then measure
    .venv/bin/python bench/pooled.py --reuse                                     # the database seeded before
    .venv/bin/python bench/pooled.py --reuse --code /tmp/before                  # and another checkout beside it

On its own bench database of $DATABASE_URL's server (else the embedded one), four services under
gunicorn with the same settings (2 sync workers), measured alternately, `--clients` connections each
requesting as fast as answers come: `direct`; `form` (direct, but with DATABASE_POOLER=transaction:
statements as a transaction pooler needs them, no PREPARE and SET LOCALs, without the pooler: what the
form costs); `pooled` (through Debian's PgBouncer, transaction mode); `found` (the same PgBouncer with
DATABASE_POOLER unset, which the service finds out at each connection). With `--code DIR`, another
checkout's `direct` and `pooled` too, on a copy of the database, in the same rounds (the code before a
change). Prints requests/s
per round, the medians and the ratios to direct (the target for pooled: at least 0.8). Not a test.
"""
import argparse
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchkit import RAISED_LIMITS, ROOT, acme_token, bench_url, copy_database, run, seed, start_gunicorn  # noqa: E402
from floor import throughput, wrk_throughput  # noqa: E402

sys.path.insert(0, str(ROOT))
from tests.support.pgbouncer import PgBouncer  # noqa: E402

DATABASE = "shiptrack_pooled_bench"


def service_envs(env, bouncer, url):
    """The environments of `direct`, `form` (direct in the transaction pooler's form), `pooled` (through
    `bouncer`) and `found` (through it with DATABASE_POOLER unset: the service finds the pooler itself)."""
    pooler = {"SHIPTRACK_DATABASE_POOLER": "transaction"}
    unset = {key: value for key, value in env.items() if key != "SHIPTRACK_DATABASE_POOLER"}
    return {"direct": env, "form": {**env, **pooler}, "pooled": {**env, **pooler, "DATABASE_URL": bouncer.url(url)},
            "found": {**unset, "DATABASE_URL": bouncer.url(url)}}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shipments", type=int, default=5000)
    parser.add_argument("--reuse", action="store_true", help="measure the database seeded before")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--code", help="another checkout whose direct and pooled run beside these")
    parser.add_argument("--wrk", action="store_true", help="load with wrk instead of Python threads (the CEO's bar)")
    parser.add_argument("--database", default=DATABASE, help="the bench database (seeded unless --reuse)")
    parser.add_argument("--port", type=int, default=18790, help="the first of the 9 ports the services take")
    args = parser.parse_args()

    url, server = bench_url(args.database)
    env = {**os.environ, "DATABASE_URL": url, "SHIPTRACK_RATE_LIMITS": RAISED_LIMITS}
    if not args.reuse:
        seed(server, env, args.shipments, args.database)
    run("db", "init", env=env)
    headers = {"Authorization": f"Bearer {acme_token(env, 'pooled')}"}
    bouncer = PgBouncer(server, "transaction").start()
    services = {name: (port, service_env)
                for (name, service_env), port in zip(service_envs(env, bouncer, url).items(), range(args.port + 1, args.port + 5))}
    code = {name: ROOT for name in services}
    if args.code:   # a copy of the database: its stored renderings its own (benchkit.copy_database)
        code_url = copy_database(server, args.database, args.database + "_code")
        code_env = {**env, "DATABASE_URL": code_url}
        services.update({"direct (code)": (args.port + 7, code_env),
                         "pooled (code)": (args.port + 8, {**services["pooled"][1], "DATABASE_URL": bouncer.url(code_url)})})
        code.update({"direct (code)": Path(args.code), "pooled (code)": Path(args.code)})
    processes = [start_gunicorn(service_env, port, workers=2, cwd=code[name])
                 for name, (port, service_env) in services.items()]
    rates = {name: [] for name in services}
    try:
        targets = {name: f"http://127.0.0.1:{port}/shipments?limit=100" for name, (port, _env) in services.items()}
        for target in targets.values():      # warm every one (stored renderings, caches)
            throughput(target, headers, args.clients, 2)
        for round_number in range(args.rounds):
            for name, target in targets.items():
                rate, _answered = (wrk_throughput if args.wrk else throughput)(target, headers, args.clients,
                                                                               args.seconds)
                rates[name].append(rate)
                print(f"round {round_number + 1}: {name:13} {rate:7.1f} requests/s", flush=True)
    finally:
        for process in processes:
            process.terminate()
            process.wait()
        bouncer.close()
    medians = {name: statistics.median(values) for name, values in rates.items()}
    print("median: " + ", ".join(f"{name} {rate:.1f}/s" for name, rate in medians.items())
          + f"; form/direct {medians['form'] / medians['direct']:.2f}, "
            f"pooled/direct {medians['pooled'] / medians['direct']:.2f}, "
            f"found/direct {medians['found'] / medians['direct']:.2f} (target at least 0.80)")
    if args.code:
        print(f"{args.code}: pooled/direct {medians['pooled (code)'] / medians['direct (code)']:.2f}; "
              f"its direct against this direct {medians['direct (code)'] / medians['direct']:.2f}")


if __name__ == "__main__":
    main()
