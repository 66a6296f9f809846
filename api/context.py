"""The request's database connection and who is asking."""
import functools
import logging
import time

from flask import current_app, g

from models import db

log = logging.getLogger(__name__)


def database():
    """The API's connection Target (models.db): its URL, pooler, timeouts and pool size from the settings."""
    config, extensions = current_app.config, current_app.extensions
    target = extensions.get("database")
    if target is None or target.url != config["DATABASE_URL"]:
        target = extensions["database"] = db.Target.from_config(config, "api")
    return target


def get_conn():
    """The request's connection, taken from the process pool on first use (one that looks alive).

    It is in autocommit: each statement commits by itself, so the rate-limit count holds its row lock
    only while it runs (a transaction around the request made every request of one token wait for the
    one before to end) and no COMMIT round trip ends a request. A read that needs one snapshot for
    several statements opens an explicit transaction for them (models.db.one_snapshot).
    Raises models.db.DatabaseUnavailable when no connection can be made (answered 503).
    """
    if "conn" not in g:
        g.conn = db.checkout(database())
        if not g.conn.autocommit:
            g.conn.autocommit = True
    return g.conn


def first_statements(work):
    """`work(conn)`: the request's first statements, run again on a new connection if the first one dropped,
    and again after a pause when a deadlock or serialization failure (models.db.TransientConflict) ended them.

    The liveness check of get_conn cannot see a connection that dies between the check and the first
    statement (or drops on the way). Repeating is safe only here: the first statement reads and counts,
    and nothing else of this request has happened; a count that committed just before its connection
    dropped is counted once more (one request too many, only on a lost connection). A second loss
    is the database being away: DatabaseLost, a DatabaseUnavailable. A conflict rolled the count back, so
    repeating it counts nothing twice; past CONFLICT_TRIES the conflict is raised (answered 503).
    """
    lost, conflicts = False, 0
    while True:
        conn = get_conn()
        try:
            return work(conn)
        except db.DatabaseLost as error:
            if lost:
                raise
            lost = True
            log.info("pooled connection lost before its first statement (%s); retrying once on a new one", error)
            _discard_conn()
        except db.TransientConflict as error:
            conflicts += 1
            if conflicts >= db.CONFLICT_TRIES:
                raise
            pause = db.conflict_pause(conflicts)
            log.warning("database conflict in the first statement, retrying in %.2f s (try %s of %s): %s",
                        pause, conflicts + 1, db.CONFLICT_TRIES, db.describe(error))
            time.sleep(pause)


def read_again_if_lost(view):
    """`view` (a GET view) run again once, on a new connection, when the one it took was lost meanwhile.

    The liveness check of get_conn cannot see a connection that dies between the check and the view's
    first statement (or drops on the way). A GET view only reads (a rendering it stores may be stored
    twice, harmlessly), so running it again is safe. A second loss is the database being away:
    DatabaseLost, a DatabaseUnavailable (answered 503).
    """
    @functools.wraps(view)
    def read(*args, **kwargs):
        try:
            return view(*args, **kwargs)
        except db.DatabaseLost as error:
            if "conn" not in g:
                raise
            log.info("pooled connection lost before the view answered (%s); retrying once on a new one", error)
            _discard_conn()
            return view(*args, **kwargs)
    return read


def _discard_conn():
    conn = g.pop("conn")
    db.checkin(conn, broken=True)


def release_conn(error=None):
    """Return the request's connection to the pool, ending a transaction an error left open.

    The connection is in autocommit (see get_conn), so nothing is left to commit. A connection lost
    meanwhile is closed and dropped from the pool; the response has been decided already.
    """
    conn = g.pop("conn", None)
    if conn is None:
        return
    broken = False
    try:
        if db.in_transaction(conn):
            conn.rollback()
    except db.DatabaseUnavailable as lost:
        log.warning("connection lost at the end of a request: %s", lost)
        broken = True
    finally:
        db.checkin(conn, broken=broken)


def principal():
    """The authenticated token, user and organization of this request."""
    return g.principal


def version():
    """The API version this response is built for."""
    return g.version
