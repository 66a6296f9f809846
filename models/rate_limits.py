"""Fixed-window request counters in PostgreSQL, shared by every worker and host."""
from dataclasses import dataclass
from datetime import datetime

# authenticate_and_count: the request's first statement, one round trip: the principal of the token
# fingerprint (None for NULL) and one hit counted in each bucket of the request. The statement itself is the
# PL/pgSQL function of the same name in schema.sql, which says what it counts and why it is a function.
_AUTHENTICATE_AND_COUNT_SQL = "SELECT * FROM authenticate_and_count(%(fingerprint)s, %(address)s, %(window)s)"
# The principal's columns of each row (the function's other columns are the count's).
PRINCIPAL_COLUMNS = ("token_id", "token_name", "scopes", "expires_at", "user_email", "organization_id",
                     "organization_name", "slug", "api_version")

# count_not_modified: a request answered 304 Not Modified is taken back from the buckets it was counted
# in (their limits do not count 304s) and counted in its 304 budget instead, both in the window it was
# counted in; past that budget's quota it stays where it was (it is refused, and refused requests count).
# Rows: the 304 budget's first, then each bucket given back (none past the quota or once pruned), each with
# the seconds until its window ends. The buckets' rows are locked in the order given, the order
# authenticate_and_count counts them in (the token's, then the address's): an UPDATE takes its rows in the
# order it finds them (the address's first, by the index), and a count of the same token and address taking
# them the other way round made a deadlock.
_NOT_MODIFIED_SQL = """
WITH not_modified AS (
  INSERT INTO rate_limit_counters AS r (bucket, window_start, hits)
  VALUES (%(not_modified)s, %(window_start)s, 1)
  ON CONFLICT (bucket, window_start) DO UPDATE SET hits = r.hits + 1
  RETURNING bucket, hits, window_start
),
locked AS (
  SELECT c.bucket FROM rate_limit_counters c
   WHERE c.bucket = ANY(%(buckets)s::text[]) AND c.window_start = %(window_start)s
   ORDER BY array_position(%(buckets)s::text[], c.bucket)
     FOR UPDATE
),
given_back AS (
  UPDATE rate_limit_counters c
     SET hits = c.hits - 1
    FROM not_modified n, locked l
   WHERE c.bucket = l.bucket AND c.window_start = %(window_start)s AND c.hits > 0
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
        cur.execute(_AUTHENTICATE_AND_COUNT_SQL, {"fingerprint": fingerprint, "address": address,
                                                  "window": window_seconds})
        return authentication(cur.fetchall())


def authentication(rows):
    """The Authentication of the rows of authenticate_and_count (columns of a statement that adds some are left out)."""
    principal = None
    if rows[0]["token_id"] is not None:
        principal = {column: rows[0][column] for column in PRINCIPAL_COLUMNS}
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
