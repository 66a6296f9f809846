"""Fixed-window rate limits shared by every process and host, counted in memory from reservations.

Each bucket (a token, an address, the requests without a valid token of an address, a 304 budget) has a
row per window in `rate_limit_counters`: what the processes have reserved of it, never more than its
quota. A process reserves about a second of its own traffic in one statement (`reserve`) and counts
requests from that reservation in memory (`Reservations.admit`); a reservation of nothing means the
window is spent, which the process then knows until the window ends, answering without a statement.
Reservations are taken from the shared count before they are used, so all processes together never
admit more than the quota; a process that stops holding some admits fewer (docs/authentication.md).
While the primary is away and reads go to a standby (`alone`), a process counts by itself: in each bucket's
window at most what was left of it when the process last reserved, or the whole quota for a bucket it
held nothing of.
"""
import math
import threading
import time
from dataclasses import dataclass

from models import db

# reserve: for each bucket, in the order given (the order every caller locks them in, so two reservations
# never wait for each other's rows), up to `wants` more of the current window, as the SQL function
# reservation (schema.sql) allows: fewer near the quota, none past it. The window is the current one of
# `window` seconds by the database's clock; each row says when it ends.
_RESERVE_SQL = """
WITH wanted AS (
  SELECT w.bucket, w.quota, w.wanted, w.position
    FROM unnest(%(buckets)s::text[], %(quotas)s::int[], %(wants)s::int[]) WITH ORDINALITY
         AS w (bucket, quota, wanted, position)
)
INSERT INTO rate_limit_counters AS r (bucket, window_start, hits, granted)
SELECT w.bucket, to_timestamp(floor(extract(epoch FROM now()) / %(window)s) * %(window)s),
       reservation(w.wanted, w.quota, 0), reservation(w.wanted, w.quota, 0)
  FROM wanted w
 ORDER BY w.position
ON CONFLICT (bucket, window_start) DO UPDATE
   SET (hits, granted) = (SELECT r.hits + reservation(w.wanted, w.quota, r.hits), reservation(w.wanted, w.quota, r.hits)
                            FROM wanted w WHERE w.bucket = excluded.bucket)
RETURNING r.bucket, r.hits, r.granted,
          ceil(extract(epoch FROM r.window_start + make_interval(secs => %(window)s) - now()))::int AS resets_in
"""

# prune: windows that ended long ago (the delivery process's housekeeping, on a schedule).
_PRUNE_SQL = "DELETE FROM rate_limit_counters WHERE window_start < now() - make_interval(secs => 2 * %(window)s)"

# The most one reservation asks for: about a second of one process's traffic is rarely more.
MOST_WANTED = 1024
# Past this many buckets kept, those whose window ended are forgotten (many addresses, each seen once).
KEPT_BUCKETS = 10_000


def reserve(conn, wanted, window_seconds):
    """Reserve requests of the current window: `wanted` maps each bucket to (quota, how many it asks for).

    Returns {bucket: (taken, granted, resets_in)}: what all processes have now reserved of the window, what
    this reservation got (0: the window is spent), and the seconds until the window ends.
    """
    buckets = list(wanted)
    rows = db.execute_all(conn, _RESERVE_SQL, {"buckets": buckets, "quotas": [wanted[bucket][0] for bucket in buckets],
                                               "wants": [wanted[bucket][1] for bucket in buckets],
                                               "window": window_seconds})
    return {row["bucket"]: (row["hits"], row["granted"], max(1, row["resets_in"])) for row in rows}


def prune(conn, window_seconds):
    """Delete the windows that ended long ago (the delivery process's housekeeping); returns how many."""
    return db.execute(conn, _PRUNE_SQL, {"window": window_seconds})


@dataclass(slots=True)
class Reserved:
    """What this process holds of one bucket's window."""

    ends: float            # time.monotonic() when the window ends
    left: int              # reserved and not used yet
    taken: int             # what all processes had reserved of the window at this process's last reservation
    granted: int           # what the last reservation got (0: the window is spent)
    reserved_at: float     # time.monotonic() of the last reservation


@dataclass(frozen=True, slots=True)
class Standing:
    """Where a request stands in one bucket: its quota, requests left (-1: refused), seconds to the window's end."""

    quota: int
    remaining: int
    resets_in: int


class Reservations:
    """The reservations of one process (one per application), shared by its threads."""

    def __init__(self, window_seconds, alone=False):
        self.window_seconds, self.alone = window_seconds, alone
        self._held = {}
        self._lock = threading.Lock()

    def admit(self, quotas, reserve_with):
        """Count one request in each bucket of `quotas` ({bucket: quota}), or in none when one of them is spent.

        `reserve_with(wanted)` runs `reserve` on a connection; it is called only for the buckets this process
        holds nothing of (never once a bucket is known spent), and the request takes its one from what it got
        before another thread can. When it raises DatabaseUnavailable and the process may count `alone` (the
        primary away, reads on a standby), it grants itself what it last knew was left (`_alone`).
        Returns ({bucket: Standing}, admitted).
        """
        mine = set()  # the buckets this request holds its one of
        while True:
            now = time.monotonic()
            with self._lock:
                held = {bucket: self._current(bucket, now) for bucket in quotas}
                for bucket, reserved in held.items():
                    if bucket not in mine and reserved is not None and reserved.left > 0:
                        reserved.left -= 1
                        mine.add(bucket)
                spent = [bucket for bucket, reserved in held.items()
                         if bucket not in mine and reserved is not None and reserved.granted == 0]
                if spent or len(mine) == len(quotas):
                    if spent:  # refused: what it took goes back
                        for bucket in mine:
                            held[bucket].left += 1
                    return {bucket: self._standing(quota, held[bucket], now, bucket in spent)
                            for bucket, quota in quotas.items()}, not spent
                wanted = {bucket: (quota, self._wanted(quota, held[bucket], now))
                          for bucket, quota in quotas.items() if bucket not in mine}
            try:
                answer = reserve_with(wanted)
            except db.DatabaseUnavailable:
                if not self.alone:
                    raise
                answer = self._alone(wanted)
            now = time.monotonic()
            with self._lock:
                for bucket, (taken, granted, resets_in) in answer.items():
                    reserved = self._add(bucket, taken, granted, now + resets_in, now)
                    if granted > 0:
                        reserved.left -= 1
                        mine.add(bucket)

    def give_back(self, buckets):
        """Return one request to each of `buckets` (a request answered 304, counted in its budget instead)."""
        now = time.monotonic()
        with self._lock:
            for bucket in buckets:
                reserved = self._current(bucket, now)
                if reserved is not None:
                    reserved.left += 1

    def standing(self, bucket, quota):
        """The Standing of `bucket` as this process knows it, without counting a request."""
        now = time.monotonic()
        with self._lock:
            return self._standing(quota, self._current(bucket, now), now)

    def _alone(self, wanted):
        """A reservation answer ({bucket: (taken, granted, resets_in)}) this process grants itself without the
        database: what was left of the window when it last reserved (the whole quota for a bucket it held
        nothing of), the window's end by this machine's clock. Taken as all of it: once used, the bucket is spent."""
        now, wall = time.monotonic(), time.time()
        answer = {}
        with self._lock:
            for bucket, (quota, _wants) in wanted.items():
                reserved = self._current(bucket, now)
                granted = quota if reserved is None else max(0, quota - reserved.taken)
                resets_in = (reserved.ends - now if reserved is not None
                             else self.window_seconds - wall % self.window_seconds)
                answer[bucket] = (quota, granted, max(1, math.ceil(resets_in)))
        return answer

    def _current(self, bucket, now):
        reserved = self._held.get(bucket)
        if reserved is not None and now >= reserved.ends:
            del self._held[bucket]
            return None
        return reserved

    def _wanted(self, quota, reserved, now):
        """About a second of traffic in the bucket: of this process's, as fast as the last reservation went,
        and never less than a second at the rate the limit allows (its quota over its window)."""
        at_the_limit = math.ceil(quota / self.window_seconds)
        if reserved is None or reserved.granted == 0:
            return max(1, min(MOST_WANTED, at_the_limit))
        per_second = reserved.granted / max(now - reserved.reserved_at, 0.001)
        return max(1, min(MOST_WANTED, max(at_the_limit, math.ceil(per_second))))

    def _add(self, bucket, taken, granted, ends, now):
        """Hold what a reservation got; returns the bucket's Reserved."""
        reserved = self._held.get(bucket)
        if reserved is None or abs(reserved.ends - ends) > self.window_seconds / 2:  # none yet, or another window
            if len(self._held) >= KEPT_BUCKETS:
                self._forget_ended(now)
            reserved = self._held[bucket] = Reserved(ends, granted, taken, granted, now)
            return reserved
        reserved.left += granted
        reserved.taken = max(reserved.taken, taken)
        reserved.granted, reserved.reserved_at = granted, now
        return reserved

    def _forget_ended(self, now):
        for bucket in [bucket for bucket, reserved in self._held.items() if now >= reserved.ends]:
            del self._held[bucket]

    def _standing(self, quota, reserved, now, spent=False):
        """The Standing of a bucket; `spent` for one whose window is spent (the request refused by it)."""
        if reserved is None:
            return Standing(quota, quota, self.window_seconds)
        resets_in = max(1, math.ceil(reserved.ends - now))
        if spent:
            return Standing(quota, -1, resets_in)
        # What all processes reserved, less what this one holds unused: exact with one process, else short
        # by what the others hold unused (docs/authentication.md).
        return Standing(quota, max(0, quota - reserved.taken + reserved.left), resets_in)
