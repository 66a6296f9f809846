"""The request's database connections (the primary's, and a standby's for reads) and who is asking."""
import functools
import logging
import time

from flask import current_app, g, request

from models import db, standby

log = logging.getLogger(__name__)


def database():
    """The API's connection Target (models.db): its URL, pooler, timeouts and pool size from the settings."""
    config, extensions = current_app.config, current_app.extensions
    target = extensions.get("database")
    if target is None or target.url != config["DATABASE_URL"]:
        target = extensions["database"] = db.Target.from_config(config, "api")
    return target


def standbys():
    """The application's models.standby.Standbys (reads from DATABASE_REPLICA_URL), None when it is not set."""
    config, extensions = current_app.config, current_app.extensions
    if not config.get("DATABASE_REPLICA_URL"):
        return None
    found = extensions.get("standbys")
    if found is None or found.standby.url != config["DATABASE_REPLICA_URL"] or found.primary != database():
        target = db.Target.from_config(config, "api", url=config["DATABASE_REPLICA_URL"], standby=True)
        found = extensions["standbys"] = standby.Standbys(database(), target, config["DATABASE_REPLICA_LAG_SECONDS"])
    return found


def get_conn():
    """The request's connection for reading: a standby's while it serves reads (models/standby.py), else the
    primary's (`primary_conn`), taken from the process pool on first use (one that looks alive).

    It is in autocommit: each statement commits by itself, and no COMMIT round trip ends a request. A read
    that needs one snapshot for several statements opens an explicit transaction for them
    (models.db.one_snapshot). A GET the standby cannot serve now, or whose standby connection failed, reads
    on the primary; one the primary cannot serve (away) reads on the standby, whatever its lag.
    Raises models.db.DatabaseUnavailable when no connection can be made (answered 503).
    """
    if "conn" not in g:
        reads = standbys()
        there = reads is not None and request.method in ("GET", "HEAD") and not g.get("on_primary")
        conn = _standby_conn(reads) if there and reads.reads_there() else None
        if conn is None:
            try:
                conn = primary_conn()
            except db.DatabaseUnavailable:
                if not there:
                    raise
                reads.lost_primary()  # the read is the standby's, whatever its lag
                conn = _standby_conn(reads)
                if conn is None:
                    raise
        g.conn = conn
    return g.conn


def primary_conn():
    """The request's connection to the primary (DATABASE_URL), for what is written (the guard's statements)."""
    if "primary_conn" not in g:
        conn = g.get("conn")
        if conn is None or conn.target.standby:
            conn = db.checkout(database())
            if not conn.autocommit:
                conn.autocommit = True
        g.primary_conn = conn
    return g.primary_conn


def on_standby():
    """Whether the request reads on a standby's connection."""
    conn = g.get("conn")
    return conn is not None and conn.target.standby


def _standby_conn(reads):
    # A standby's connection that may serve now, else None (its lag over the bound, or it is lost).
    try:
        conn = db.checkout(reads.standby)
    except db.DatabaseUnavailable as error:
        log.warning("the standby is unavailable (%s): reads go to the primary", error)
        reads.lost_standby()
        return None
    if not reads.serves(conn):
        db.checkin(conn)
        return None
    if not conn.autocommit:
        conn.autocommit = True
    conn.writer = primary_conn  # where what a read stores goes (models.shipments.store_renderings)
    return conn


def first_statements(work, read=False):
    """`work(conn)`: the guard's statements on the primary (`_first_statements`).

    While the primary is away (DatabaseUnavailable) with standbys set, reads go to a standby and the guard
    counts alone (models.rate_limits); `work` that only reads (`read`) then runs on the standby, for a GET.
    """
    try:
        return _first_statements(work)
    except db.DatabaseUnavailable:
        reads = standbys()
        if reads is None:
            raise
        reads.lost_primary()
        if not read or request.method not in ("GET", "HEAD"):
            raise
    return work(get_conn())


def _first_statements(work):
    """`work(conn)` on the primary: the request's first statements, run again on a new connection if the first one dropped,
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
        conn = primary_conn()
        try:
            return work(conn)
        except db.DatabaseLost as error:
            if lost:
                raise
            lost = True
            log.info("pooled connection lost before its first statement (%s); retrying once on a new one", error)
            _discard_conn("primary_conn")
        except db.TransientConflict as error:
            conflicts += 1
            if conflicts >= db.CONFLICT_TRIES:
                raise
            pause = db.conflict_pause(conflicts)
            log.warning("database conflict in the first statement, retrying in %.2f s (try %s of %s): %s",
                        pause, conflicts + 1, db.CONFLICT_TRIES, db.describe(error))
            time.sleep(pause)


def read_again_if_lost(view):
    """`view` (a GET view) run again once, on a new connection, when the one it took was lost meanwhile; on
    the primary when it read on a standby that failed it or had not reached what it asked for.

    The liveness check of get_conn cannot see a connection that dies between the check and the view's
    first statement (or drops on the way). A GET view only reads (a rendering it stores may be stored
    twice, harmlessly), so running it again is safe. A second loss is the database being away:
    DatabaseLost, a DatabaseUnavailable (answered 503). A standby's failure of any kind (lost, not
    answering in time, a conflict with its replay, a feed cursor it has not reached: models.standby.Behind)
    sends the read to the primary: a lost standby costs no request a 5xx.
    """
    @functools.wraps(view)
    def read(*args, **kwargs):
        try:
            return view(*args, **kwargs)
        except (db.DatabaseUnavailable, *db.TransientConflict, standby.Behind) as error:
            if on_standby():
                if isinstance(error, db.DatabaseUnavailable):
                    standbys().lost_standby()
                log.warning("the standby could not answer (%s): read again on the primary", db.describe(error))
                _discard_conn("conn", broken=not isinstance(error, standby.Behind))
                g.on_primary = True
                return view(*args, **kwargs)
            if not isinstance(error, db.DatabaseLost) or "conn" not in g:
                raise
            log.info("pooled connection lost before the view answered (%s); retrying once on a new one", error)
            _discard_conn("conn")
            return view(*args, **kwargs)
    return read


def _discard_conn(key, broken=True):
    conn = g.pop(key)
    for other in ("conn", "primary_conn"):
        if g.get(other) is conn:
            g.pop(other)
    conn.writer = None
    db.checkin(conn, broken=broken)


def release_conn(error=None):
    """Return the request's connections to their pools, ending a transaction an error left open.

    The connections are in autocommit (see get_conn), so nothing is left to commit. A connection lost
    meanwhile is closed and dropped from the pool; the response has been decided already.
    """
    for conn in {id(conn): conn for conn in (g.pop("conn", None), g.pop("primary_conn", None)) if conn}.values():
        broken = False
        try:
            if db.in_transaction(conn):
                conn.rollback()
        except db.DatabaseUnavailable as lost:
            log.warning("connection lost at the end of a request: %s", lost)
            broken = True
        finally:
            conn.writer = None
            db.checkin(conn, broken=broken)


def principal():
    """The authenticated token, user and organization of this request."""
    return g.principal


def version():
    """The API version this response is built for."""
    return g.version
