"""What the benchmarks share: the bench database, the flask CLI, gunicorn on 127.0.0.1, percentiles."""
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg2
import requests

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from models import db  # noqa: E402

BENCH_DB = "shiptrack_bench"
# Rate limits would stop a benchmark: raised for it (requests are still counted).
RAISED_LIMITS = '{"window_seconds":300,"per_token":10000000,"per_ip":10000000,"anonymous_per_ip":10000000}'


def bench_url(database=BENCH_DB):
    """URL of a bench database on the configured (or embedded) server, and the server's URL."""
    server = os.environ.get("DATABASE_URL") or db.embedded_database_url()
    return urlunsplit(urlsplit(server)._replace(path="/" + database)), server


def run(*args, env, capture=False, cwd=ROOT):
    """Run a flask CLI command of the checkout `cwd` (this one by default) against the bench database."""
    command = [sys.executable, "-m", "flask", "--app", "app", *args]
    out = subprocess.run(command, cwd=cwd, env=env, check=True, text=True,
                         stdout=subprocess.PIPE if capture else None)
    return out.stdout.strip() if capture else None


def recreate(server, database, template=None):
    """Drop `database` on `server` (ending its sessions) and create it again, empty or as a copy of `template`."""
    admin = psycopg2.connect(urlunsplit(urlsplit(server)._replace(path="/postgres")))
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        cur.execute(f'CREATE DATABASE "{database}"' + (f' TEMPLATE "{template}"' if template else ""))
    admin.close()


def schema_database(server, database):
    """Recreate `database` on `server` with the schema and nothing else; an autocommit connection to it."""
    from tests.support.databases import apply_schema

    recreate(server, database)
    conn = db.connect(urlunsplit(urlsplit(server)._replace(path="/" + database)))
    conn.autocommit = True
    apply_schema(conn)
    return conn


def seed(server, env, count, database=BENCH_DB, cwd=ROOT):
    """Recreate a bench database (env's DATABASE_URL names it) and fill it with `count` demo shipments, by the
    checkout `cwd` (its schema and its seed)."""
    recreate(server, database)
    run("db", "init", env=env, cwd=cwd)
    started = time.monotonic()
    run("demo", "seed", "--shipments", str(count), env=env, cwd=cwd)
    print(f"seeded {count} shipments in {time.monotonic() - started:.0f} s", flush=True)
    conn = psycopg2.connect(env["DATABASE_URL"])
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute("VACUUM ANALYZE")
    conn.close()


def code_database(server, env, database, code, shipments=None):
    """The URL of `<database>_code`, the database another checkout (`code`, e.g. the code before a change) is
    served from beside `database`.

    Each checkout has a database of its own: its schema (the code before a migration cannot run on the schema
    after it) and its stored renderings (docs/rendering.md, `renderer`: on one database each version would
    replace the other's). With `shipments` it is seeded now by that checkout's own `flask demo seed`, which
    plans from seeded random numbers: the same demo data as `database`'s seeded with the same count. Without,
    it is used as an earlier run of a bench seeded it (`flask db init` of the checkout is all that runs).
    """
    copy = database + "_code"
    url = urlunsplit(urlsplit(server)._replace(path="/" + copy))
    code_env = {**env, "DATABASE_URL": url}
    if shipments:
        seed(server, code_env, shipments, copy, cwd=code)
    elif not exists(server, copy):
        raise SystemExit(f"{copy} does not exist: seed it with --shipments N (each checkout seeds its own)")
    run("db", "init", env=code_env, cwd=code)
    return url


def exists(server, database):
    """Whether `database` exists on `server`."""
    admin = psycopg2.connect(urlunsplit(urlsplit(server)._replace(path="/postgres")))
    try:
        with admin.cursor() as cur:
            cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,))
            return cur.fetchone() is not None
    finally:
        admin.close()


def acme_token(env, name, cwd=ROOT):
    """A new 30-day token of acme's owner called `name` (one of that name is replaced), made by the checkout
    `cwd`'s CLI in env's database; its value."""
    return run("tokens", "create", "--org", "acme", "--user", "owner@acme.example", "--name", name,
               "--expires", "30d", "--replace", env=env, capture=True, cwd=cwd)


def acme_id(url):
    """The id of the demo organization acme in the database at `url`."""
    conn = psycopg2.connect(url)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT id FROM organizations WHERE slug = 'acme'")
            return cur.fetchone()[0]
    finally:
        conn.close()


def start_gunicorn(env, port, workers, target="app:create_app()", cwd=ROOT, probe="/openapi.json", stdout=None,
                   config=None):
    """gunicorn with `target` (the service by default) on 127.0.0.1:port; returns the master once it answers.

    `stdout` takes the access log (gunicorn.conf.py's "-"), e.g. subprocess.DEVNULL; the bench's own by default.
    `config` is a gunicorn settings file instead of `cwd`'s gunicorn.conf.py.
    """
    with socket.socket() as taken:   # else the probe would be answered by whatever serves the port
        if taken.connect_ex(("127.0.0.1", port)) == 0:
            raise SystemExit(f"127.0.0.1:{port} is in use: stop what serves it, or give the bench other ports")
    process = subprocess.Popen([str(Path(sys.executable).parent / "gunicorn"), "-w", str(workers),
                                *(["-c", str(config)] if config else []),
                                "-b", f"127.0.0.1:{port}", "--log-level", "warning", target],
                               cwd=cwd, env=env, stdout=stdout)
    for _ in range(100):
        if process.poll() is not None:
            break
        try:
            requests.get(f"http://127.0.0.1:{port}{probe}", timeout=1)
            return process
        except requests.RequestException:
            time.sleep(0.2)
    process.kill()
    process.wait()
    raise SystemExit(f"gunicorn did not start on 127.0.0.1:{port}")


def start_service(env, port, workers, options=()):
    """The service under the project's gunicorn.conf.py on 127.0.0.1:port, the access log to /dev/null, with
    gunicorn's `options` (a worker class, say); returns the master once /healthz answers."""
    process = subprocess.Popen([str(Path(sys.executable).parent / "gunicorn"), "-c", "gunicorn.conf.py", "-w",
                                str(workers), *options, "-b", f"127.0.0.1:{port}", "--log-level", "warning",
                                "app:create_app()"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL)
    for _ in range(150):
        try:
            if requests.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return process
        except requests.RequestException:
            pass
        time.sleep(0.2)
    process.kill()
    raise SystemExit("gunicorn did not start")


def percentile(values, fraction):
    """The value at `fraction` of the sorted values (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


def answers(url):
    """Whether `url` answers 200."""
    try:
        return requests.get(url, timeout=1).status_code == 200
    except requests.RequestException:
        return False
