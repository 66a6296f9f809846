"""Throughput of GET /shipments?limit=100 direct and through PgBouncer in transaction mode, in one run.

    .venv/bin/python bench/pooled.py --shipments 5000 --rounds 3 --seconds 10   # seed, then measure
    .venv/bin/python bench/pooled.py --reuse                                     # the database seeded before
    .venv/bin/python bench/pooled.py --reuse --code /tmp/before                  # and another checkout beside it

On its own bench database of $DATABASE_URL's server (else the embedded one), four services under
gunicorn with the same settings (2 workers and the service's gunicorn.conf.py: its threaded worker, 32
threads; the access log to /dev/null, as bench/floor.py does), measured alternately, `--clients`
connections each requesting as fast as answers come: `direct`; `form` (direct, but with DATABASE_POOLER=transaction:
statements as a transaction pooler needs them, no PREPARE and SET LOCALs, without the pooler: what the
form costs); `pooled` (through Debian's PgBouncer, transaction mode, as many server connections per
database as `--clients`, so that what is measured is the pooler's cost, not a wait for a connection: the
threaded workers run every request in flight at once); `found` (the same PgBouncer with
DATABASE_POOLER unset, which the service finds out at each connection). With `--code DIR`, another
checkout's `direct` and `pooled` too, on a database that checkout seeds itself (benchkit.code_database;
reused as it is with `--reuse`), in the same rounds (the code before a change). Prints requests/s per
round, the medians and the ratios to direct (docs/performance.md has the target). Not a test.

Only 2xx answers count: a service that met any other answer, or a connection error, is printed in
capitals, every ratio it enters is INVALID, and the run exits with status 1.
"""
import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchkit import RAISED_LIMITS, ROOT, acme_token, bench_url, code_database, run, seed, start_gunicorn  # noqa: E402
from floor import ratio, throughput, wrk_throughput  # noqa: E402

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
    parser.add_argument("--pool-size", type=int, help="PgBouncer's server connections per database (--clients by "
                                                      "default: a request in flight never waits for one)")
    args = parser.parse_args()

    url, server = bench_url(args.database)
    env = {**os.environ, "DATABASE_URL": url, "SHIPTRACK_RATE_LIMITS": RAISED_LIMITS}
    if not args.reuse:
        seed(server, env, args.shipments, args.database)
    run("db", "init", env=env)
    token = {"Authorization": f"Bearer {acme_token(env, 'pooled')}"}
    bouncer = PgBouncer(server, "transaction", pool_size=args.pool_size or args.clients).start()
    services = {name: (port, service_env)
                for (name, service_env), port in zip(service_envs(env, bouncer, url).items(), range(args.port + 1, args.port + 5))}
    code, headers = {name: ROOT for name in services}, {name: token for name in services}
    if args.code:   # the same data in a database of its own (benchkit.code_database), and a token of it
        code_url = code_database(server, env, args.database, Path(args.code), None if args.reuse else args.shipments)
        code_env = {**env, "DATABASE_URL": code_url}
        pooled_env = {**services["pooled"][1], "DATABASE_URL": bouncer.url(code_url)}
        services.update({"direct (code)": (args.port + 7, code_env), "pooled (code)": (args.port + 8, pooled_env)})
        code.update({"direct (code)": Path(args.code), "pooled (code)": Path(args.code)})
        code_token = {"Authorization": f"Bearer {acme_token(code_env, 'pooled', cwd=Path(args.code))}"}
        headers.update({"direct (code)": code_token, "pooled (code)": code_token})
    processes, rates, failed = [], {name: [] for name in services}, dict.fromkeys(services, 0)
    try:
        for name, (port, service_env) in services.items():
            processes.append(start_gunicorn(service_env, port, workers=2, cwd=code[name], stdout=subprocess.DEVNULL))
        targets = {name: f"http://127.0.0.1:{port}/shipments?limit=100" for name, (port, _env) in services.items()}
        for name, target in targets.items():      # warm every one (stored renderings, caches)
            failed[name] += throughput(target, headers[name], args.clients, 2)[2]
        for round_number in range(args.rounds):
            for name, target in targets.items():
                rate, _answered, refused = (wrk_throughput if args.wrk else throughput)(target, headers[name],
                                                                                        args.clients, args.seconds)
                rates[name].append(rate)
                failed[name] += refused
                print(f"round {round_number + 1}: {name:13} {rate:7.1f} requests/s", flush=True)
                if refused:
                    print(f"round {round_number + 1}: {name.upper()} MET {refused} ANSWERS THAT WERE NOT 2XX OR "
                          f"CONNECTION ERRORS: THIS RUN DOES NOT COUNT", flush=True)
    finally:
        for process in processes:
            process.terminate()
            process.wait()
        bouncer.close()
    medians = {name: statistics.median(values) for name, values in rates.items()}
    print("median: " + ", ".join(f"{name} {rate:.1f}/s" for name, rate in medians.items())
          + f"; form/direct {ratio(rates, failed, 'form', 'direct')}, "
            f"pooled/direct {ratio(rates, failed, 'pooled', 'direct')} (target at least 0.95), "
            f"found/direct {ratio(rates, failed, 'found', 'direct')}")
    if args.code:
        print(f"{args.code}: pooled/direct {ratio(rates, failed, 'pooled (code)', 'direct (code)')}; "
              f"its direct against this direct {ratio(rates, failed, 'direct (code)', 'direct')}")
    if any(failed.values()):
        print("THIS RUN DOES NOT COUNT: " + ", ".join(f"{name} met {count} answers not 2xx"
                                                      for name, count in failed.items() if count))
    sys.exit(1 if any(failed.values()) else 0)


if __name__ == "__main__":
    main()
