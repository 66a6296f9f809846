"""Where a connection goes and how it is made: a process's `Target` (URL, pooler, timeouts, application name)
and `connect`, which sets a new connection up for the pooler in between. models/pool.py keeps a process's
connections, models/db.py names both for every caller.
"""
import logging
import os
import threading
from dataclasses import dataclass, replace

import psycopg2
import psycopg2.extensions

from models import breaker, deadline
from models.cursors import Connection, Cursor, execute, execute_one
from models.db_errors import DatabaseUnavailable, unavailable

log = logging.getLogger(__name__)

# What DATABASE_POOLER may say; None (not set) finds out at each connection (see connect).
POOLERS = (None, "session", "transaction")
# The isolation every statement was written for, whatever the database's default: a DBA may make that
# SERIALIZABLE, where concurrent counts, claims and recordings fail with 40001. A block that needs one
# snapshot names REPEATABLE READ itself (models.db.one_snapshot).
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
    standby: bool = False              # a hot standby's (DATABASE_REPLICA_URL): reads only, a breaker of its own

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


def connect(target):
    """A new connection (rows as dicts) to a Target, set up for its pooler, with its timeouts.

    Nothing rides in the startup packet but the application name (which every pooler passes on):
    PgBouncer refuses `options`. A connection that keeps its session SETs its settings once; through
    a transaction pooler, SET LOCALs open each of its transactions instead (models.cursors). When
    the target does not say (DATABASE_POOLER not set), the connection finds out first (`_behind_pooler`),
    and its `target` then says "transaction" when it found one. Any failure is a DatabaseUnavailable
    (DatabaseSetupError when it never passes by itself): refused, unreachable, not a URL, not answering.
    """
    extra = {} if _names_itself(target.url) else {"application_name": target.application_name}
    if target.connect_timeout:
        extra["connect_timeout"] = max(2, round(target.connect_timeout))  # libpq's own minimum is 2 s
    dsn = deadline.silent_last(target.url)
    while True:
        try:
            with breaker.connecting(target.standby):
                conn = psycopg2.connect(dsn, connection_factory=Connection, cursor_factory=target.cursor_factory,
                                        **extra)
            break
        except psycopg2.Error as error:
            hung = getattr(error, "hung_host", None)  # of a multi-host URL, one that did not answer in time:
            dsn = hung and deadline.without_host(dsn, hung)  # tried next, as libpq's own wait does (models/deadline.py)
            if not dsn:
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
    say_once("pooler", "a pooler is between this process and the database (the server's process id is not the "
                       "one the connection was given): its connections keep no session state (SET LOCALs, nothing "
                       "prepared, no LISTEN); set SHIPTRACK_DATABASE_POOLER to say which it is (session or "
                       "transaction)")
    return True


def say_once(key, message, *args):
    """Log `message` as a WARNING once per process for each `key` (a forked worker says it again)."""
    with _said_lock:
        first, _said[key] = _said.get(key) != os.getpid(), os.getpid()
    if first:
        log.warning(message, *args)


_said = {}  # what say_once has said: its key, and the process that said it
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
