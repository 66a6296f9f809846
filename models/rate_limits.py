"""Fixed-window request counters in PostgreSQL, shared by every worker and host."""
import random

# count_request: add one hit to each bucket's current window and return the new counts.
_HIT_SQL = """
INSERT INTO rate_limit_counters AS r (bucket, window_start, hits)
SELECT bucket, to_timestamp(floor(extract(epoch FROM now()) / %(window)s) * %(window)s), 1
  FROM unnest(%(buckets)s::text[]) AS bucket
ON CONFLICT (bucket, window_start) DO UPDATE SET hits = r.hits + 1
RETURNING bucket, hits,
          ceil(extract(epoch FROM window_start + make_interval(secs => %(window)s) - now()))::int AS resets_in
"""

# prune: windows that ended long ago.
_PRUNE_SQL = "DELETE FROM rate_limit_counters WHERE window_start < now() - make_interval(secs => 2 * %(window)s)"


def count_request(conn, buckets, window_seconds):
    """Count one request against each bucket; returns {bucket: (hits, seconds until the window resets)}."""
    with conn.cursor() as cur:
        cur.execute(_HIT_SQL, {"buckets": list(buckets), "window": window_seconds})
        counts = {row["bucket"]: (row["hits"], max(1, row["resets_in"])) for row in cur.fetchall()}
        # Old windows are cleared now and then rather than on every request.
        if random.random() < 0.005:
            cur.execute(_PRUNE_SQL, {"window": window_seconds})
    return counts
