"""What the health checks and the metrics read from the database: one bounded statement each.

Each statement is sent after `SET LOCAL statement_timeout` in one string: on a connection in
autocommit PostgreSQL runs a multi-statement string as one transaction, so the timeout holds for
that statement alone and costs no round trip of its own.
"""
from models.db import execute_one

# readiness: the schema version this database is at (GET /readyz compares it with the code's).
_SCHEMA_STATE_SQL = """SET LOCAL statement_timeout = %(milliseconds)s;
SELECT count(*) AS applied, coalesce(max(version), 0) AS newest FROM schema_migrations"""

# gauges: the delivery backlog, the render failures and the change feed's lag, for GET /metrics.
# Due deliveries are read through webhook_deliveries_next_idx. The feed's horizon is held by the
# oldest transaction with an id that is running in this database, in no database (a background
# worker) or prepared (models/changes.py); its age is how far every mirror lags at most.
_GAUGES_SQL = """SET LOCAL statement_timeout = %(milliseconds)s;
SELECT due.count AS deliveries_due,
       coalesce(extract(epoch FROM now() - due.oldest), 0)::float8 AS oldest_due_seconds,
       (SELECT count(*) FROM events WHERE state = 'render_failed') AS render_failures,
       coalesce(extract(epoch FROM now() - (
         SELECT min(started) FROM (
           SELECT a.xact_start AS started FROM pg_stat_activity a
            WHERE a.backend_xid IS NOT NULL AND (a.datname = current_database() OR a.datname IS NULL)
           UNION ALL
           SELECT p.prepared FROM pg_prepared_xacts p WHERE p.database = current_database()) AS holding)),
         0)::float8 AS change_feed_lag_seconds
  FROM (SELECT count(*) AS count, min(next_attempt_at) AS oldest FROM webhook_deliveries
         WHERE state = 'pending' AND next_attempt_at <= now()) AS due"""


def _bounded(conn, statement, timeout_seconds):
    return execute_one(conn, statement, {"milliseconds": max(1, int(timeout_seconds * 1000))})


def schema_state(conn, timeout_seconds):
    """{applied, newest}: how many migrations the database has recorded and the newest one's number."""
    return _bounded(conn, _SCHEMA_STATE_SQL, timeout_seconds)


def gauges(conn, timeout_seconds):
    """{deliveries_due, oldest_due_seconds, render_failures, change_feed_lag_seconds}, read now."""
    return _bounded(conn, _GAUGES_SQL, timeout_seconds)
