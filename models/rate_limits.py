"""Fixed-window request counters in PostgreSQL, shared by every worker and host."""
import random

from models import db, tokens

# The current window of `window` seconds, and the seconds until it ends (both statements below).
_WINDOW_START = "to_timestamp(floor(extract(epoch FROM now()) / %(window)s::int) * %(window)s::int)"
_RESETS_IN = "ceil(extract(epoch FROM window_start + make_interval(secs => %(window)s::int) - now()))::int"

# authenticate_and_count: the request's first statement, prepared (models.db.Prepared), one round trip.
# Finds the principal of the token fingerprint (none for NULL) and counts one hit in the current window
# of each bucket of the request: its token and its address, or, without a valid token, the budget of
# requests without one per address (spec: failed authentications count there, so a valid token from
# the same address is never held up by someone else's bad ones). Each row: a bucket, its policy (a key
# of the RATE_LIMITS setting), the new count, and the principal's columns (NULL without one).
_AUTHENTICATE_AND_COUNT = db.Prepared("authenticate_and_count", f"""
WITH principal AS ({tokens.AUTHENTICATE_SQL}),
buckets AS (
  SELECT b.bucket, b.policy
    FROM principal p
   CROSS JOIN LATERAL (VALUES ('token:' || p.token_id, 'per_token'), ('ip:' || %(address)s::text, 'per_ip'))
         AS b (bucket, policy)
  UNION ALL
  SELECT 'anonymous:' || %(address)s::text, 'anonymous_per_ip' WHERE NOT EXISTS (SELECT 1 FROM principal)
),
hits AS (
  INSERT INTO rate_limit_counters AS r (bucket, window_start, hits)
  SELECT b.bucket, {_WINDOW_START}, 1 FROM buckets b
  ON CONFLICT (bucket, window_start) DO UPDATE SET hits = r.hits + 1
  RETURNING bucket, hits, window_start, {_RESETS_IN} AS resets_in
)
SELECT h.bucket, b.policy, h.hits, h.window_start, h.resets_in, p.*
  FROM hits h JOIN buckets b ON b.bucket = h.bucket LEFT JOIN principal p ON true
""")
# The count's own columns of each row (SELECT above); the rest are the principal's (tokens.AUTHENTICATE_SQL).
_COUNT_COLUMNS = frozenset({"bucket", "policy", "hits", "window_start", "resets_in"})

# uncount_request: take back the hit of a request answered 304, in the window it was counted in.
_UNHIT_SQL = """
UPDATE rate_limit_counters
   SET hits = hits - 1
 WHERE bucket = ANY(%(buckets)s::text[]) AND window_start = %(window_start)s AND hits > 0
RETURNING bucket, hits, """ + _RESETS_IN + """ AS resets_in
"""

# prune: windows that ended long ago.
_PRUNE_SQL = "DELETE FROM rate_limit_counters WHERE window_start < now() - make_interval(secs => 2 * %(window)s)"


def authenticate_and_count(conn, fingerprint, address, window_seconds):
    """(principal or None, {bucket: policy}, {bucket: (hits, seconds until reset, window_start)}).

    `fingerprint` is models.tokens.fingerprint of the token sent, or None when none (or a malformed one)
    was sent; the hits are counted whoever asks.
    """
    with conn.cursor() as cur:
        _AUTHENTICATE_AND_COUNT.execute(cur, {"fingerprint": fingerprint, "address": address,
                                              "window": window_seconds})
        rows = cur.fetchall()
        # Old windows are cleared now and then rather than on every request (not one of its statements).
        if random.random() < 0.005:
            db.execute_uncounted(cur, _PRUNE_SQL, {"window": window_seconds})
    principal = None
    if rows[0]["token_id"] is not None:
        principal = {column: value for column, value in rows[0].items() if column not in _COUNT_COLUMNS}
    policies = {row["bucket"]: row["policy"] for row in rows}
    counts = {row["bucket"]: (row["hits"], max(1, row["resets_in"]), row["window_start"]) for row in rows}
    return principal, policies, counts


def uncount_request(conn, buckets, window_start, window_seconds):
    """Take back one counted request from each bucket's window `window_start`; counts as authenticate_and_count."""
    with conn.cursor() as cur:
        cur.execute(_UNHIT_SQL, {"buckets": list(buckets), "window_start": window_start, "window": window_seconds})
        return {row["bucket"]: (row["hits"], max(1, row["resets_in"]), window_start) for row in cur.fetchall()}
