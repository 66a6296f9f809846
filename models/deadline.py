"""A deadline on each wait for the database, kept by the client, for what the server's timeouts cannot see.

`statement_timeout` is the server's own: a statement queued in a pooler for a server connection
(PgBouncer waits `query_wait_timeout`, 120 s by default, while the database is away) or sent to a
server that stopped answering never reaches it, and the request would hang until gunicorn kills its
worker. psycopg2's wait callback lets the process wait on the connection's socket itself: this one
waits at most the deadline for each answer, then gives up. psycopg2 closes a connection whose wait
failed, so it leaves the pool, and the error is a QueryCanceledError, which models.db_errors counts
as a TIMEOUT (the API answers 503). Installed in gunicorn's workers only (gunicorn.conf.py): a wait
callback runs every statement through psycopg2's asynchronous mode, which has no COPY (the seed's).
"""
import select
import time

import psycopg2.extensions

_seconds = None


def install(seconds):
    """Every wait of this process's connections for the database lasts at most `seconds` (None or 0: no limit)."""
    global _seconds
    _seconds = float(seconds) if seconds else None
    psycopg2.extensions.set_wait_callback(_wait if _seconds else None)


def _wait(conn):
    """psycopg2's wait callback: poll the connection until its operation is done or the deadline passes."""
    deadline = time.monotonic() + _seconds
    while True:
        state = conn.poll()
        if state == psycopg2.extensions.POLL_OK:
            return
        remaining = deadline - time.monotonic()
        if remaining > 0:
            if state == psycopg2.extensions.POLL_READ:
                ready = select.select([conn.fileno()], [], [], remaining)[0]
            elif state == psycopg2.extensions.POLL_WRITE:
                ready = select.select([], [conn.fileno()], [], remaining)[1]
            else:
                raise psycopg2.OperationalError(f"bad state from poll: {state}")
            if ready:
                continue
        raise psycopg2.extensions.QueryCanceledError(
            f"the database did not answer within {_seconds:g} s (DATABASE_CLIENT_TIMEOUT)")
