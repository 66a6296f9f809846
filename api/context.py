"""The request's database connection and who is asking."""
import logging

import psycopg2
from flask import current_app, g

from models import db

log = logging.getLogger(__name__)


def get_conn():
    """The request's connection, taken from the process pool on first use (one that looks alive).

    Raises models.db.DatabaseUnavailable when no connection can be made (answered 503).
    """
    if "conn" not in g:
        g.conn = db.checkout(current_app.config["DATABASE_URL"])
        g.conn.statement_count = 0
    return g.conn


def first_statements(work):
    """`work(conn)`: the request's first statements, run once more on a new connection if the first one dropped.

    The liveness check of get_conn cannot see a connection that dies between the check and the first
    statement (or drops on the way). Repeating is safe only here: nothing of this request has been
    committed yet (the rate-limit count commits at the end of the request or when a view's snapshot
    begins), and a lost connection rolled its transaction back. A second failure is the database
    being away: DatabaseUnavailable.
    """
    for last_try in (False, True):
        conn = get_conn()
        try:
            return work(conn)
        except (psycopg2.OperationalError, psycopg2.InterfaceError) as error:
            if not db.is_disconnect(error, conn):
                raise
            reason = " ".join(str(error).split())
            if last_try:
                raise db.DatabaseUnavailable(reason) from error
            log.info("pooled connection lost before its first statement (%s); retrying once on a new one", reason)
            _discard_conn()


def _discard_conn():
    conn = g.pop("conn")
    db.checkin(current_app.config["DATABASE_URL"], conn, broken=True)


def release_conn(error=None):
    """Commit (rate-limit counts and version pins must stick even on a 4xx) and return the connection.

    A connection lost meanwhile is closed and dropped from the pool; the response has been decided
    already, so the loss costs only this request's count (and a first pin, taken again next time).
    """
    conn = g.pop("conn", None)
    if conn is None:
        return
    broken = False
    try:
        if error is None and not conn.closed:
            conn.commit()
        elif not conn.closed:
            conn.rollback()
    except (psycopg2.OperationalError, psycopg2.InterfaceError) as lost:
        if not db.is_disconnect(lost, conn):
            raise
        log.warning("connection lost at the end of a request: %s", " ".join(str(lost).split()))
        broken = True
    finally:
        recorder = current_app.config.get("STATEMENT_RECORDER")
        if recorder is not None:
            recorder.append(conn.statement_count)
        db.checkin(current_app.config["DATABASE_URL"], conn, broken=broken)


def principal():
    """The authenticated token, user and organization of this request."""
    return g.principal


def version():
    """The API version this response is built for."""
    return g.version
