"""Fixed-window request counters in PostgreSQL, shared by every worker and host."""
from dataclasses import dataclass
from datetime import datetime

from models import db

# authenticate_and_count: the request's first statement, prepared (models.db.Prepared), one round trip.
# Finds the principal of the token fingerprint (none for NULL; the `principal` CTE is
# models.tokens.AUTHENTICATE_SQL) and counts one hit in the current window of `window` seconds of each
# bucket of the request: its token and its address, or, without a valid token, the budget of
# requests without one per address (spec: failed authentications count there, so a valid token from
# the same address is never held up by someone else's bad ones). Each row: a bucket, its policy (a key
# of the RATE_LIMITS setting), the new count, the seconds until its window ends, and the principal's
# columns (NULL without one).
_AUTHENTICATE_AND_COUNT_SQL = """
WITH principal AS (
  SELECT t.id AS token_id, t.name AS token_name, t.scopes, t.expires_at, u.email AS user_email,
         o.id AS organization_id, o.name AS organization_name, o.slug, o.api_version
    FROM tokens t
    JOIN organizations o ON o.id = t.organization_id
    JOIN users u ON u.id = t.user_id
    JOIN memberships m ON m.organization_id = t.organization_id AND m.user_id = t.user_id
   WHERE t.fingerprint = %(fingerprint)s
     AND t.revoked_at IS NULL
     AND (t.expires_at IS NULL OR t.expires_at > now())
     AND m.removed_at IS NULL
),
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
  SELECT b.bucket, to_timestamp(floor(extract(epoch FROM now()) / %(window)s::int) * %(window)s::int), 1
    FROM buckets b
  ON CONFLICT (bucket, window_start) DO UPDATE SET hits = r.hits + 1
  RETURNING bucket, hits, window_start,
            ceil(extract(epoch FROM window_start + make_interval(secs => %(window)s::int) - now()))::int AS resets_in
)
SELECT h.bucket, b.policy, h.hits, h.window_start, h.resets_in, p.*
  FROM hits h JOIN buckets b ON b.bucket = h.bucket LEFT JOIN principal p ON true
"""
_AUTHENTICATE_AND_COUNT = db.Prepared("authenticate_and_count", _AUTHENTICATE_AND_COUNT_SQL)
# The count's own columns of each row (SELECT above); the rest are the principal's.
_COUNT_COLUMNS = frozenset({"bucket", "policy", "hits", "window_start", "resets_in"})

# count_not_modified: a request answered 304 Not Modified is taken back from the buckets it was counted
# in (their limits do not count 304s) and counted in its 304 budget instead, both in the window it was
# counted in; past that budget's quota it stays where it was (it is refused, and refused requests count).
# Rows: the 304 budget's first, then each bucket given back (none past the quota or once pruned), each with
# the seconds until its window ends.
_NOT_MODIFIED_SQL = """
WITH not_modified AS (
  INSERT INTO rate_limit_counters AS r (bucket, window_start, hits)
  VALUES (%(not_modified)s, %(window_start)s, 1)
  ON CONFLICT (bucket, window_start) DO UPDATE SET hits = r.hits + 1
  RETURNING bucket, hits, window_start
),
given_back AS (
  UPDATE rate_limit_counters c
     SET hits = c.hits - 1
    FROM not_modified n
   WHERE c.bucket = ANY(%(buckets)s::text[]) AND c.window_start = %(window_start)s AND c.hits > 0
     AND n.hits <= %(quota)s
  RETURNING c.bucket, c.hits, c.window_start
)
SELECT bucket, hits,
       ceil(extract(epoch FROM window_start + make_interval(secs => %(window)s::int) - now()))::int AS resets_in,
       0 AS position
  FROM not_modified
UNION ALL
SELECT bucket, hits,
       ceil(extract(epoch FROM window_start + make_interval(secs => %(window)s::int) - now()))::int AS resets_in,
       1 AS position
  FROM given_back
ORDER BY position
"""

# prune: windows that ended long ago (the delivery process's housekeeping, on a schedule).
_PRUNE_SQL = "DELETE FROM rate_limit_counters WHERE window_start < now() - make_interval(secs => 2 * %(window)s)"


def authenticate_and_count(conn, fingerprint, address, window_seconds):
    """The Authentication of a request: its principal (None without a valid token), buckets and Counts.

    `fingerprint` is models.tokens.fingerprint of the token sent, or None when none (or a malformed one)
    was sent; the hits are counted whoever asks.
    """
    with conn.cursor() as cur:
        _AUTHENTICATE_AND_COUNT.execute(cur, {"fingerprint": fingerprint, "address": address,
                                              "window": window_seconds})
        rows = cur.fetchall()
    principal = None
    if rows[0]["token_id"] is not None:
        principal = {column: value for column, value in rows[0].items() if column not in _COUNT_COLUMNS}
    policies = {row["bucket"]: row["policy"] for row in rows}
    counts = {row["bucket"]: Count(row["hits"], max(1, row["resets_in"]), row["window_start"]) for row in rows}
    return Authentication(principal, policies, counts)


def count_not_modified(conn, buckets, not_modified, window_start, quota, window_seconds):
    """Move a request answered 304 from `buckets` to its 304 budget `not_modified` unless that passes `quota`.

    Returns the NotModifiedCount: the 304 budget's hits and seconds until reset, and the Counts of the
    buckets given back (empty past the quota).
    """
    with conn.cursor() as cur:
        cur.execute(_NOT_MODIFIED_SQL, {"buckets": list(buckets), "not_modified": not_modified, "quota": quota,
                                        "window_start": window_start, "window": window_seconds})
        budget, *given_back = cur.fetchall()
    counts = {row["bucket"]: Count(row["hits"], max(1, row["resets_in"]), window_start) for row in given_back}
    return NotModifiedCount(budget["hits"], max(1, budget["resets_in"]), counts)


def prune(conn, window_seconds):
    """Delete the windows that ended long ago (the delivery process's housekeeping); returns how many."""
    with conn.cursor() as cur:
        cur.execute(_PRUNE_SQL, {"window": window_seconds})
        return cur.rowcount


@dataclass(frozen=True, slots=True)
class Count:
    """One bucket's count: its hits in the window, the seconds until the window resets, when the window began."""

    hits: int
    resets_in: int
    window_start: datetime


@dataclass(frozen=True, slots=True)
class Authentication:
    """What a request's first statement found: who asks (None without a valid token) and its counted buckets.

    `policies` maps each bucket to its policy (a key of RATE_LIMITS), `counts` each bucket to its Count.
    """

    principal: dict | None
    policies: dict
    counts: dict

    @property
    def window_start(self):
        """The start of the window every bucket of the request was counted in."""
        return next(iter(self.counts.values())).window_start


@dataclass(frozen=True, slots=True)
class NotModifiedCount:
    """A 304's count in its budget (hits, seconds until reset) and the Counts of the buckets given back."""

    hits: int
    resets_in: int
    given_back: dict
