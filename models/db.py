"""Connections: one door for the API, the delivery script and the CLI.

Where a connection goes (`Target`) and how one is made (`connect`: models/connections.py), the process's
pool (`checkout`, `checkin`: models/pool.py), the calls every model runs its statements through
(`execute`, `execute_one`, `execute_all`: models/cursors.py) and explicit transactions (here). The
embedded server lives in models/embedded.py. The database errors (models/db_errors.py) are named here for
every caller: DatabaseUnavailable and its kinds (DatabaseLost, DatabaseTimeout, DatabaseSetupError),
which the connection layer raises when the database is away, and the classes of a statement's errors
(UniqueViolation, CheckViolation, ...), which pass as the driver raised them.
"""
from contextlib import contextmanager

import psycopg2.extensions
from psycopg2 import sql  # noqa: F401  (composing identifiers: the demo's COPY)

from models import connections
from models.connections import ISOLATION, POOLERS, PROCESSES, SESSION_SETTINGS, Target  # noqa: F401
from models.cursors import Connection, Cursor, Prepared, execute, execute_all, execute_one  # noqa: F401
# The names every other module catches (it never classifies a driver's error itself: models/cursors.py did).
from models.db_errors import (CONFLICT_TRIES, CheckViolation, DatabaseLost, DatabaseSetupError,  # noqa: F401
                              DatabaseTimeout, DatabaseUnavailable, DeadlockDetected, Error, ForeignKeyViolation,
                              RaiseException, SerializationFailure, TransientConflict, UndefinedTable,
                              UniqueViolation, conflict_pause, describe)
from models.embedded import (EMBEDDED_DATA_DIR, EMBEDDED_DATABASE, PROJECT_DIR,  # noqa: F401
                             embedded_database_url, resolve_database_url)
from models.pool import as_target, checkin, checkout, close_pool  # noqa: F401

SCHEMA_PATH = PROJECT_DIR / "schema.sql"


def connect(target):
    """A new connection to a Target or URL (a bare URL: the process pool's own target when it has that URL),
    set up for its pooler, with its timeouts; DatabaseUnavailable when none can be made (models.connections)."""
    return connections.connect(as_target(target))


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
