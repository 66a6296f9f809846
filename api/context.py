"""The request's database connection and who is asking."""
from flask import current_app, g

from models import db


def get_conn():
    """The request's connection, taken from the process pool on first use."""
    if "conn" not in g:
        pool = db.get_pool(current_app.config["DATABASE_URL"])
        g.conn = pool.getconn()
        g.conn.statement_count = 0
    return g.conn


def release_conn(error=None):
    """Commit (rate-limit counts and version pins must stick even on a 4xx) and return the connection."""
    conn = g.pop("conn", None)
    if conn is None:
        return
    pool = db.get_pool(current_app.config["DATABASE_URL"])
    try:
        if error is None and not conn.closed:
            conn.commit()
        elif not conn.closed:
            conn.rollback()
    finally:
        recorder = current_app.config.get("STATEMENT_RECORDER")
        if recorder is not None:
            recorder.append(conn.statement_count)
        pool.putconn(conn, close=bool(conn.closed))


def principal():
    """The authenticated token, user and organization of this request."""
    return g.principal


def version():
    """The API version this response is built for."""
    return g.version
