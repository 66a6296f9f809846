"""Database errors, translated once: the driver's errors become the project's own where the driver is called.

Each error is one of four kinds: the connection LOST (or the server away: it passes), a statement that
ran out of its TIMEOUT (the database not answering in time: it passes too), a SETUP error (the URL,
the credentials, the pooler's configuration: it does not pass by itself) or a bad STATEMENT (a bug, or
a conflict such as a deadlock on a healthy connection). Where the driver is called (models/cursors.py,
models/connections.py, models/pool.py) the first three are raised as DatabaseLost, DatabaseTimeout and
DatabaseSetupError (each a DatabaseUnavailable) and a statement's error passes as the driver raised it;
its classes are named here, so that no module outside models/ imports the driver. Of the statements'
errors, a TransientConflict (a deadlock, a serialization failure) ended its transaction for a conflict
with another one: the same work run again as a whole is expected to succeed (`conflict_pause` spaces
the tries).
"""
import random

import psycopg2
import psycopg2.extensions
from psycopg2 import Error, InterfaceError, OperationalError  # noqa: F401  (the statement errors' classes)
from psycopg2.errors import (CheckViolation, DeadlockDetected, ForeignKeyViolation,  # noqa: F401
                             RaiseException, SerializationFailure, UndefinedTable, UniqueViolation)
from psycopg2.pool import PoolError  # noqa: F401

LOST, TIMEOUT, SETUP, STATEMENT = "lost", "timeout", "setup", "statement"

# What says a connection is gone rather than a statement wrong; the equivalent of SQLAlchemy's
# psycopg2 dialect `is_disconnect` (behind its pool_pre_ping): libpq's and psycopg2's own words, on
# the first line of the message, outside any quoted text.
_DISCONNECT_MESSAGES = ("terminating connection", "closed the connection", "connection not open",
                        "could not receive data from server", "could not send data to server",
                        "connection already closed", "cursor already closed", "losed the connection unexpectedly",
                        "connection has been closed unexpectedly", "SSL SYSCALL error", "SSL error:")
# admin_shutdown, crash_shutdown, cannot_connect_now: the server's state. is_disconnect also takes every code
# of SQLSTATE class 08 (connection exception) and class 53 (insufficient resources: too many connections,
# out of memory or disk), by their prefix.
_DISCONNECT_CODES = ("57P01", "57P02", "57P03")
# Setup errors: invalid authorization (28000: also an unknown role), failed password, unknown database.
_SETUP_CODES = ("28000", "28P01", "3D000")
# The same said by libpq, the server or PgBouncer when a connection is made (no SQLSTATE reaches psycopg2).
_SETUP_MESSAGES = ("unsupported startup parameter", "authentication failed", "no password supplied",
                   "pg_hba.conf", "no such database", "no such user", "does not exist", "invalid dsn",
                   "invalid connection option", "invalid sslmode value", "invalid port number",
                   "invalid integer value")
_CANCELED = "57014"  # query_canceled: statement_timeout (or an operator's pg_cancel_backend)

# SQLSTATE 40001 and 40P01: the server rolled the transaction back for a conflict with another one (its
# statements met in the opposite order, or SERIALIZABLE could not order them); nothing of it is left, so
# running the same work again is safe where the work is whole. A tuple, caught like a class: `except
# db.TransientConflict`. Other class 40 codes (an integrity or completion doubt) are no invitation to repeat.
TransientConflict = (SerializationFailure, DeadlockDetected)
# How often work a conflict cut is tried in all, and the first pause between tries (doubling, jittered).
CONFLICT_TRIES = 3
CONFLICT_PAUSE_SECONDS = 0.05


class DatabaseUnavailable(Exception):
    """No connection to the database could be made or kept (refused, unreachable, not answering in time)."""

    kind = LOST


class DatabaseLost(DatabaseUnavailable):
    """The connection was lost (the server ended it, restarted, or the network dropped it)."""


class DatabaseTimeout(DatabaseUnavailable):
    """A statement ran out of its time: the server's statement_timeout or the client's deadline."""

    kind = TIMEOUT


class DatabaseSetupError(DatabaseUnavailable):
    """The database refuses this configuration (a pooler's startup parameters, credentials, database, role)."""

    kind = SETUP


_TYPES = {LOST: DatabaseLost, TIMEOUT: DatabaseTimeout, SETUP: DatabaseSetupError}


def describe(error):
    """An error's message on one line."""
    return " ".join(str(error).split()) or type(error).__name__


def classify(error, conn=None):
    """LOST, TIMEOUT, SETUP or STATEMENT: what a psycopg2 error means (see the module's description)."""
    if isinstance(error, DatabaseUnavailable):
        return error.kind
    if not isinstance(error, psycopg2.Error):
        return STATEMENT
    code = getattr(error, "pgcode", None) or ""
    # The server's statement_timeout, or the client's own deadline (models/deadline.py), which has no SQLSTATE.
    if code == _CANCELED or isinstance(error, psycopg2.extensions.QueryCanceledError):
        return TIMEOUT
    if code in _SETUP_CODES or (not code and _names_setup(str(error))):
        return SETUP
    if is_disconnect(error, conn):
        return LOST
    return STATEMENT


def _names_setup(message):
    # libpq puts the server's words after "FATAL:" or "ERROR:"; the address before them may hold anything.
    text = message.partition("\n")[0]
    for marker in ("FATAL:", "ERROR:"):
        if marker in text:
            text = text.partition(marker)[2]
            break
    lowered = text.lower()
    return any(words in lowered for words in _SETUP_MESSAGES)


def is_disconnect(error, conn=None):
    """Whether a psycopg2 error means the connection is lost (so the server may be away), not a bad statement."""
    if isinstance(error, DatabaseUnavailable):
        return isinstance(error, DatabaseLost)
    if not isinstance(error, (psycopg2.OperationalError, psycopg2.InterfaceError)):
        return False
    if conn is not None and conn.closed:
        return True
    code = getattr(error, "pgcode", None) or ""
    if code.startswith(("08", "53")) or code in _DISCONNECT_CODES:
        return True
    first_line = str(error).partition("\n")[0]
    for message in _DISCONNECT_MESSAGES:
        at = first_line.find(message)
        if at >= 0 and '"' not in first_line[:at]:
            return True
    return False


def translate(error, conn=None):
    """The project's error for a driver's error that means the database is away; None for a statement's error."""
    if isinstance(error, DatabaseUnavailable):
        return error
    kind = classify(error, conn)
    return None if kind == STATEMENT else _TYPES[kind](describe(error))


def conflict_pause(tries):
    """Seconds to wait after try number `tries` met a TransientConflict: doubling from CONFLICT_PAUSE_SECONDS.

    Jittered, so that the two sides of a deadlock do not meet again at the same instant.
    """
    return CONFLICT_PAUSE_SECONDS * 2 ** (tries - 1) * random.uniform(0.5, 1.5)


def unavailable(error):
    """The DatabaseUnavailable (or subclass) a failed connect means, with its one-line reason."""
    return translate(error) or DatabaseUnavailable(describe(error))
