"""Fixed-window request counters in PostgreSQL, shared by every worker and host."""
import random

# count_request: add one hit to each bucket's current window and return the new counts.
_HIT_SQL = """
INSERT INTO rate_limit_counters AS r (bucket, window_start, hits)
SELECT bucket, to_timestamp(floor(extract(epoch FROM now()) / %(window)s) * %(window)s), 1
  FROM unnest(%(buckets)s::text[]) AS bucket
ON CONFLICT (bucket, window_start) DO UPDATE SET hits = r.hits + 1
RETURNING bucket, hits, window_start,
          ceil(extract(epoch FROM window_start + make_interval(secs => %(window)s) - now()))::int AS resets_in
"""

# uncount_request: take back the hit of a request answered 304, in the window it was counted in.
_UNHIT_SQL = """
UPDATE rate_limit_counters
   SET hits = hits - 1
 WHERE bucket = ANY(%(buckets)s::text[]) AND window_start = %(window_start)s AND hits > 0
RETURNING bucket, hits,
          ceil(extract(epoch FROM window_start + make_interval(secs => %(window)s) - now()))::int AS resets_in
"""

# prune: windows that ended long ago.
_PRUNE_SQL = "DELETE FROM rate_limit_counters WHERE window_start < now() - make_interval(secs => 2 * %(window)s)"


def count_request(conn, buckets, window_seconds):
    """Count one request against each bucket; returns {bucket: (hits, seconds until reset, window_start)}."""
    with conn.cursor() as cur:
        cur.execute(_HIT_SQL, {"buckets": list(buckets), "window": window_seconds})
        counts = {row["bucket"]: (row["hits"], max(1, row["resets_in"]), row["window_start"])
                  for row in cur.fetchall()}
        # Old windows are cleared now and then rather than on every request.
        if random.random() < 0.005:
            cur.execute(_PRUNE_SQL, {"window": window_seconds})
    return counts


def uncount_request(conn, buckets, window_start, window_seconds):
    """Take back one counted request from each bucket's window `window_start`; returns counts as count_request."""
    with conn.cursor() as cur:
        cur.execute(_UNHIT_SQL, {"buckets": list(buckets), "window_start": window_start, "window": window_seconds})
        return {row["bucket"]: (row["hits"], max(1, row["resets_in"]), window_start) for row in cur.fetchall()}
