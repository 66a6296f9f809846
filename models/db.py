"""Connections: one module for the API, the delivery script and the CLI.

Where a connection goes (`Target`: URL, pooler, timeouts, application name), how it is set up, the
API's per-process pool and explicit transactions. The cursor classes live in models/cursors.py, the
embedded server in models/embedded.py. The database errors (models/db_errors.py) are named here for
every caller: DatabaseUnavailable and its kinds (DatabaseLost, DatabaseTimeout, DatabaseSetupError),
which the connection layer raises when the database is away, and the classes of a statement's errors
(UniqueViolation, CheckViolation, ...), which pass as the driver raised them.
"""
import collections
import logging
import os
import select
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, replace

import psycopg2
import psycopg2.extensions
from psycopg2 import sql  # noqa: F401  (composing identifiers: the demo's COPY)

from models import breaker, deadline
from models.cursors import Connection, Cursor, Prepared, execute, execute_all, execute_one  # noqa: F401
# The names every other module catches (it never classifies a driver's error itself: models/cursors.py did).
from models.db_errors import (CONFLICT_TRIES, CheckViolation, DatabaseLost, DatabaseSetupError,  # noqa: F401
                              DatabaseTimeout, DatabaseUnavailable, DeadlockDetected, Error, ForeignKeyViolation,
                              RaiseException, SerializationFailure, TransientConflict, UndefinedTable,
                              UniqueViolation, conflict_pause, describe)
from models.db_errors import InterfaceError, PoolError, unavailable
from models.embedded import (EMBEDDED_DATA_DIR, EMBEDDED_DATABASE, PROJECT_DIR,  # noqa: F401
                             embedded_database_url, resolve_database_url)

SCHEMA_PATH = PROJECT_DIR / "schema.sql"
log = logging.getLogger(__name__)

# How long a checkout waits for a lent connection to come back when a new one cannot be made, for a
# target without a connect timeout (one with waits that long).
LENT_WAIT_SECONDS = 5.0
# After a new connection failed while the process held others, how long its requests share those before the
# pool tries to make one again: a full pooler, or a database too slow to connect to, stays so for a while.
REGROW_SECONDS = 30.0
# What DATABASE_POOLER may say; None (not set) finds out at each connection (see connect).
POOLERS = (None, "session", "transaction")
# The isolation every statement was written for, whatever the database's default: a DBA may make that
# SERIALIZABLE, where concurrent counts, claims and recordings fail with 40001. A block that needs one
# snapshot names REPEATABLE READ itself (one_snapshot).
ISOLATION = "read committed"
# Sessions read timestamps in UTC. Fuzzy name search (`<%`) accepts a word similarity of 0.5
# (pg_trgm's default 0.6 misses a swapped pair of letters in a short name such as "Fruti Co").
# Their transactions are ISOLATION unless they name another.
SESSION_SETTINGS = (("timezone", "UTC"), ("pg_trgm.word_similarity_threshold", "0.5"),
                    ("default_transaction_isolation", ISOLATION))
# The settings of each process (config.py): application name, then its connect and statement timeouts.
PROCESSES = {
    "api": ("shiptrack-api", "DATABASE_CONNECT_TIMEOUT", "DATABASE_STATEMENT_TIMEOUT"),
    "delivery": ("shiptrack-delivery", "DELIVERY_CONNECT_TIMEOUT", "DELIVERY_STATEMENT_TIMEOUT"),
    "cli": ("shiptrack-cli", "CLI_CONNECT_TIMEOUT", "CLI_STATEMENT_TIMEOUT"),
}


@dataclass(frozen=True)
class Target:
    """Where and how a process connects: its URL, the pooler in between, timeouts, its name, its pool."""

    url: str
    application_name: str = "shiptrack"
    pooler: str | None = None          # "session", "transaction", or None: found at connect (docs/operations.md)
    connect_timeout: float = 0         # seconds; 0 waits as long as the operating system does
    statement_timeout: float = 0       # seconds; 0 lets a statement run as long as it takes
    pool_size: int = 8
    settings: tuple = ()               # more (name, value) session settings of this process
    cursor_factory: type = Cursor      # the class of its cursors (tests give one that counts statements)

    @classmethod
    def from_config(cls, config, process, url=None, **more):
        """The target of `process` ("api", "delivery" or "cli") from config.load_config()'s keys."""
        name, connect_key, statement_key = PROCESSES[process]
        pooler = config["DATABASE_POOLER"] or None
        if pooler not in POOLERS:
            raise ValueError(f"DATABASE_POOLER must be session, transaction or null, not {pooler!r}")
        return cls(url or config["DATABASE_URL"], name, pooler, float(config[connect_key] or 0),
                   float(config[statement_key] or 0), int(config["DATABASE_POOL_SIZE"]), **more)

    @property
    def session_settings(self):
        """Every setting of this target's sessions, the statement timeout included."""
        timeout = (("statement_timeout", str(int(self.statement_timeout * 1000))),) if self.statement_timeout else ()
        return SESSION_SETTINGS + timeout + tuple(self.settings)


def as_target(target):
    """A Target; a bare URL means the process pool's own target when it has that URL, else the defaults."""
    if isinstance(target, Target):
        return target
    pool = _pool
    if pool is not None and pool.target.url == target:
        return pool.target
    return Target(target)


def connect(target):
    """A new connection (rows as dicts) to a Target or URL, set up for its pooler, with its timeouts.

    Nothing rides in the startup packet but the application name (which every pooler passes on):
    PgBouncer refuses `options`. A connection that keeps its session SETs its settings once; through
    a transaction pooler, SET LOCALs open each of its transactions instead (models.cursors). When
    the target does not say (DATABASE_POOLER not set), the connection finds out first (`_behind_pooler`),
    and its `target` then says "transaction" when it found one. Any failure is a DatabaseUnavailable
    (DatabaseSetupError when it never passes by itself): refused, unreachable, not a URL, not answering.
    """
    target = as_target(target)
    extra = {} if _names_itself(target.url) else {"application_name": target.application_name}
    if target.connect_timeout:
        extra["connect_timeout"] = max(2, round(target.connect_timeout))  # libpq's own minimum is 2 s
    try:
        conn = psycopg2.connect(target.url, connection_factory=Connection,
                                cursor_factory=target.cursor_factory, **extra)
    except psycopg2.Error as error:
        raise unavailable(error) from error
    conn.target = target
    autocommit = conn.autocommit
    conn.autocommit = True
    try:
        if target.pooler is None and _behind_pooler(conn):
            conn.target = replace(target, pooler="transaction")  # what others read of this connection
        if conn.target.pooler == "transaction":
            conn.transaction_prefix, conn.prepares = _settings_sql(target, "SET LOCAL"), False
            conn.isolation_prefix = f"SET LOCAL transaction_isolation = '{ISOLATION}'; "
        else:
            execute(conn, _settings_sql(target, "SET"))
    except BaseException as error:
        conn.close()
        if isinstance(error, psycopg2.Error) and not isinstance(error, DatabaseUnavailable):
            raise unavailable(error) from error  # a statement's error here: this connection cannot be set up
        raise
    conn.autocommit = autocommit
    return conn


def _behind_pooler(conn):
    """Whether a pooler stands between `conn` and the server; the first found is said once per process.

    A pooler that hands a client's transactions to several server sessions cannot give the client the
    process id of any one of them, which a cancel request names: it gives one of its own (PgBouncer
    does, in both modes), so the server's pg_backend_pid() differs from the id the connection was
    given. A session pooler cannot be told from a transaction pooler here: both are taken for the
    latter, whose form (SET LOCALs, nothing prepared, no LISTEN) works through either.
    """
    if execute_one(conn, "SELECT pg_backend_pid() AS pid")["pid"] == conn.info.backend_pid:
        return False
    _say_once("pooler", "a pooler is between this process and the database (the server's process id is not the "
                        "one the connection was given): its connections keep no session state (SET LOCALs, nothing "
                        "prepared, no LISTEN); set SHIPTRACK_DATABASE_POOLER to say which it is (session or "
                        "transaction)")
    return True


def _say_once(key, message, *args):
    # One WARNING per process for each `key` (a forked worker says it again: it is another process).
    with _said_lock:
        first, _said[key] = _said.get(key) != os.getpid(), os.getpid()
    if first:
        log.warning(message, *args)


_said = {}  # what _say_once has said: its key, and the process that said it
_said_lock = threading.Lock()


def _names_itself(url):
    # An application_name written in the URL (an operator's, a test's) is kept.
    try:
        return "application_name" in psycopg2.extensions.parse_dsn(url)
    except psycopg2.ProgrammingError:
        return False  # not a URL: connect says so


def _settings_sql(target, command):
    # A default SET LOCAL would shape no transaction: the transaction's own level is set instead, where it
    # names none (models.cursors.Connection.isolation_prefix).
    return "".join(f"{command} {name} = '{value}'; " for name, value in target.session_settings
                   if command == "SET" or name != "default_transaction_isolation")


class Pool:
    """Up to `target.pool_size` connections of one process to one target; idle ones are reused last-in first.

    A database that answers slowly may take longer to make a connection than connect_timeout allows, and
    a pooler smaller than the processes' pools together gives a new one none, while the connections the
    process has still answer: a request that cannot get a new one waits for one of those to come back
    rather than fail, and the pool makes no new one for REGROW_SECONDS after (said once in the log).
    While one connection is being made the others wait for a lent one instead of making more (one slow
    connect at a time, not one per request).
    """

    def __init__(self, target):
        self.target, self.closed = target, False
        self._idle, self._open, self._making = [], 0, 0
        self._regrow_at = float("-inf")  # monotonic time before which no connection is made while others are open
        self._waiting = collections.deque()  # one [connection or None] per thread waiting, first come first
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)  # a connection came back, or a connect ended

    def get(self, wait_seconds=0):
        """An idle connection, else a new one, else one lent now once it comes back within `wait_seconds`.

        DatabaseTimeout when none comes back in time, the connect's DatabaseUnavailable when a new one
        cannot be made and none is lent to wait for, PoolError once the pool is closed.
        """
        failed = None
        while True:
            conn = self._lent_back_or_turn(wait_seconds, failed)
            if conn is not None:
                return conn
            try:
                conn = connect(self.target)
            except BaseException as error:
                self._made(None)
                if not isinstance(error, DatabaseUnavailable) or isinstance(error, DatabaseSetupError):
                    raise
                failed = error
                self._refused(error)
                continue
            self._made(conn)
            return conn

    def _refused(self, error):
        # A new connection failed while the process holds others: wait for those for a while, and say why once.
        with self._changed:
            holding = self._open
            if not holding:
                return
            self._regrow_at = time.monotonic() + REGROW_SECONDS
        _say_once("smaller", "a new database connection could not be made while this process holds %s (%s): its "
                             "requests wait for those, and it tries again every %s s; the database, or a pooler "
                             "between, gives this process fewer than SHIPTRACK_DATABASE_POOL_SIZE (%s) connections (a "
                             "pooler's pool must hold the pools of every process behind it: docs/scaling.md)",
                  holding, error, REGROW_SECONDS, self.target.pool_size)

    def _lent_back_or_turn(self, wait_seconds, failed):
        # An idle connection; else None when this thread is to make one (counted as open); else, waiting
        # up to wait_seconds for either, what ends the wait. After `failed` (a connect that failed) only
        # a lent one will do. Waiters are served in turn: put() hands a connection to the first in line.
        until, turn = time.monotonic() + wait_seconds, None
        with self._changed:
            try:
                while True:
                    if self.closed:
                        raise PoolError("connection pool is closed")
                    if turn and turn[0] is not None:
                        return turn[0]
                    if self._idle:
                        return self._idle.pop()
                    lent = self._open - len(self._idle) - self._making
                    may_make = (failed is None and self._open < self.target.pool_size
                                and (self._making == 0 or lent == 0)
                                and (self._open == 0 or time.monotonic() >= self._regrow_at))
                    if may_make:
                        self._open += 1
                        self._making += 1
                        return None
                    remaining = until - time.monotonic()
                    if failed is not None and lent + self._making == 0:
                        raise failed  # nothing of this process's that could come back
                    if remaining <= 0:
                        raise failed or DatabaseTimeout(f"none of the {self.target.pool_size} connections of the "
                                                        f"pool came back within {wait_seconds:g} s")
                    if turn is None:
                        turn = [None]
                        self._waiting.append(turn)
                    self._changed.wait(remaining)
            finally:
                if turn is not None and turn[0] is None:  # still in line: leave it, found by identity (all are [None])
                    del self._waiting[next(i for i, waiting in enumerate(self._waiting) if waiting is turn)]

    def _made(self, conn):
        with self._changed:
            self._making -= 1
            if conn is None:
                self._open -= 1
            self._changed.notify_all()
        if conn is not None:
            conn.pool = self

    def put(self, conn, close=False):
        """Take a connection back, to the first thread waiting for one; a broken one, or any once closed, is closed."""
        with self._changed:
            keep = not (close or conn.closed or self.closed)
            if keep and self._waiting:
                self._waiting.popleft()[0] = conn
            elif keep:
                self._idle.append(conn)
            else:
                self._open -= 1
            self._changed.notify_all()
        if not keep:
            conn.close()

    def close(self):
        """Close the idle connections now and each lent one when it comes back."""
        with self._lock:
            self.closed, idle, self._idle = True, self._idle, []
            self._open -= len(idle)
        for conn in idle:
            conn.close()


_pool = None
_pool_pid = None
_pool_lock = threading.Lock()


def get_pool(target):
    """The process's pool for `target`, made after fork so workers never share sockets.

    A pool for another target (tests switch databases) replaces it, and the old one is closed.
    """
    global _pool, _pool_pid
    target = as_target(target)
    with _pool_lock:
        if _pool is None or _pool_pid != os.getpid() or _pool.target != target:
            if _pool is not None and _pool_pid == os.getpid():
                _pool.close()
            _pool, _pool_pid = Pool(target), os.getpid()
        return _pool


def close_pool():
    """Close every pooled connection (tests switch databases)."""
    global _pool
    with _pool_lock:
        if _pool is not None and _pool_pid == os.getpid():
            _pool.close()
        _pool = None


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
    except (OSError, ValueError, InterfaceError):
        return False
    return not poller.poll(0)


def checkout(target):
    """A connection from the process's pool that looks alive; dead ones are closed and dropped from the pool.

    Raises DatabaseUnavailable when a new connection cannot be made (DatabaseSetupError when it never
    will), and at once while the database is taken for not answering (models/breaker.py), unless this
    checkout is the one that finds out whether it answers again.
    """
    if breaker.admit():
        return _probe(get_pool(target))
    return _take(get_pool(target))


def _take(pool):
    # The pool keeps few idle connections; every one may have died in the same outage. A new one that
    # cannot be made raises DatabaseUnavailable (connect), unless one of the process's comes back
    # meanwhile: as long as a connect may take, it is what the request would have waited anyway.
    for _attempt in range(pool.target.pool_size + 1):
        conn = pool.get(wait_seconds=pool.target.connect_timeout or LENT_WAIT_SECONDS)
        if looks_alive(conn):
            return conn
        pool.put(conn, close=True)
    raise DatabaseUnavailable("every pooled connection was dead")


def _probe(pool):
    # The breaker's probe: one statement (a pooler answers a connection by itself) on a connection of the
    # pool's (an idle one that looks alive, else a new one), all within the connect timeout. Its outcome
    # closes the breaker or keeps it open, whatever happens. Idle connections are kept: on a database
    # that answers slowly they are the ones that still answer.
    answered, reason, started = False, "", time.monotonic()
    try:
        with deadline.within(pool.target.connect_timeout or None):
            conn = _take(pool)
            try:
                autocommit, conn.autocommit = conn.autocommit, True  # one round trip: no BEGIN
                with conn.cursor(cursor_factory=psycopg2.extensions.cursor) as cur:  # the driver's own
                    cur.execute("SELECT 1")
                conn.autocommit = autocommit
            except (DatabaseUnavailable, psycopg2.Error) as error:  # any failure here is the database away
                pool.put(conn, close=True)
                if isinstance(error, DatabaseUnavailable):
                    raise  # the connection's setters and cursor() raise the project's own
                raise unavailable(error) from error  # the driver's own cursor, a statement's error too
        answered = True
        return conn
    except DatabaseUnavailable as error:
        reason = str(error)
        raise
    finally:
        breaker.probed(answered, reason, since=started)


def checkin(target, conn, broken=False):
    """Give a connection back to its pool; a broken or closed one is closed and dropped."""
    pool = getattr(conn, "pool", None)
    if pool is None:
        conn.close()
    else:
        pool.put(conn, close=broken or bool(conn.closed))


def in_transaction(conn):
    """Whether `conn` is open and in a transaction that has not ended (a rollback would undo something)."""
    return not conn.closed and conn.info.transaction_status != psycopg2.extensions.TRANSACTION_STATUS_IDLE


@contextmanager
def transaction(conn, isolation_level=psycopg2.extensions.ISOLATION_LEVEL_DEFAULT):
    """Run the block's statements in one explicit transaction: committed at its end, rolled back on error.

    For an autocommit connection (the API's, the delivery script's), whose statements otherwise commit
    one by one. psycopg2 opens it with one BEGIN (naming the isolation level, so the level costs no
    statement of its own); the connection is in autocommit again after the block. On a connection
    already in a transaction, what came before is committed first.
    """
    conn.commit()
    autocommit = conn.autocommit
    conn.autocommit = False
    conn.isolation_level = isolation_level
    try:
        yield conn
        conn.commit()
    finally:
        # A connection lost in the block is closed: nothing to undo, and the caller sees the loss itself.
        if not conn.closed:
            if conn.status != psycopg2.extensions.STATUS_READY:
                conn.rollback()
            conn.isolation_level = psycopg2.extensions.ISOLATION_LEVEL_DEFAULT
            conn.autocommit = autocommit


def one_snapshot(conn):
    """Run the block's statements on one snapshot: a REPEATABLE READ transaction of their own."""
    return transaction(conn, psycopg2.extensions.ISOLATION_LEVEL_REPEATABLE_READ)


def group_rows(rows, key):
    """Rows grouped by the value of `key`, which is removed from each row; order kept."""
    grouped = {}
    for row in rows:
        grouped.setdefault(row.pop(key), []).append(row)
    return grouped
