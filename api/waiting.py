"""Requests held until their organization's feed changes: GET /changes and GET /events with `wait` (docs/sync.md).

A view answers as always, then offers the worker to hold the request (`answer`) when it has nothing new for
the client. Held, a request is a parked socket in its worker (held_requests.py) and a `Hold` in this process's
`Waiters`: no thread, no place among the requests the application runs at once, no database connection.
It is run again, as a whole request, when its organization's feed changes (the listening connection of
models/principals.py hears it) or when its wait ends; that run answers, with the count of its first run
(api/guard.py COUNTED_BY). Without the service's worker (a WSGI test client, another server) nothing is held.
"""
import heapq
import itertools
import logging
import random
import threading
import time
from dataclasses import dataclass, field

from flask import g, request

from api import guard
from api.context import database
from api.errors import InvalidToken
from models import db, tokens
from models.db import execute_all

log = logging.getLogger(__name__)

JITTER = 1 / 16           # a hold ends at a random point of the sixteenth of its wait after it
POLL_SECONDS = 10         # X-Poll-Interval of an answer with nothing new to a request that did not wait
FULL_POLL_SECONDS = 5     # ... and of one this process had no room to hold (WAITERS_PER_PROCESS)
RECHECK_SECONDS = 1.0     # a woken request that still finds nothing looks again this often
HOLD = "shiptrack.hold"   # WSGI environ: the worker's offer to hold this request (held_requests.py)
HELD = "shiptrack.held"   # WSGI environ: the Hold of a request run again
HOLDING = "shiptrack.holding"  # WSGI environ: this run's answer is dropped, the request held (not recorded)
CHANNELS = {"changes": "shiptrack_changes", "events": "shiptrack_events"}  # notify_changes, notify_events

# The header every answer of GET /changes and GET /events carries (docs/sync.md), in their descriptions.
POLL_HEADERS = {"X-Poll-Interval": {
    "description": f"Seconds to wait before the next call: 0 after a page with items or a call held with `wait`, "
                   f"{POLL_SECONDS} after an empty page without `wait`, {FULL_POLL_SECONDS} when this instance held "
                   f"as many calls as it may and answered at once.", "schema": {"type": "integer", "minimum": 0}}}

# feed_heads (schema.sql): where the feeds of organizations stand, for a process that cannot listen.
_HEADS_SQL = "SELECT organization_id, changes, events FROM feed_heads(%(ids)s::bigint[])"


@dataclass(eq=False)
class Hold:
    """A held request: its feed (`kind`, organization), when its wait ends, and how it was counted."""

    kind: str
    organization_id: int
    ends_at: float                 # time.monotonic() at which it is answered whatever happens
    authentication: object         # the guard's Authentication of its first run (counted once)
    resume: object = None          # the worker's: run the request again (called once per holding)
    woken: bool = False            # run again because its feed changed (not the end of its wait)
    recheck_at: float | None = None
    parked: bool = False           # the worker's state of its socket (held_requests.py), in its main thread
    gone: bool = False
    sequence: int = field(default_factory=itertools.count().__next__)


class Waiters:
    """The requests this process holds, by feed and organization, and the thread that ends their waits."""

    def __init__(self):
        self.limit = None
        self._held = {}            # (kind, organization_id): {Hold}
        self._heard = {}           # (kind, organization_id): the number of the last notification heard
        self._heads = {}           # organization_id: its heads at the last look (not listening)
        self._count = itertools.count(1)
        self._timers = []
        self._changed = threading.Condition()
        self._thread = None

    def __len__(self):
        return sum(len(holds) for holds in self._held.values())

    def heard(self, kind, organization_id):
        """The number of the last notification of this feed heard (0: none): taken before a view reads."""
        return self._heard.get((kind, organization_id), 0)

    def add(self, hold, heard_before):
        """Hold `hold` unless the process holds its limit (False); woken at once if its feed changed since
        `heard_before` (a notification heard while its view read)."""
        key = (hold.kind, hold.organization_id)
        with self._changed:
            if len(self) >= self.limit:
                return False
            self._held.setdefault(key, set()).add(hold)
            heapq.heappush(self._timers, (hold.ends_at, hold.sequence, hold))
            if hold.recheck_at is not None:
                heapq.heappush(self._timers, (hold.recheck_at, hold.sequence, hold))
            self._changed.notify()
            if self._thread is None:
                self._thread = threading.Thread(target=self._end_waits, name="shiptrack-waits", daemon=True)
                self._thread.start()
        if self._heard.get(key, 0) != heard_before:
            self.wake(hold.kind, hold.organization_id)
        return True

    def remove(self, hold):
        """Forget `hold` (its client went); True if it was still held."""
        with self._changed:
            holds = self._held.get((hold.kind, hold.organization_id), set())
            if hold not in holds:
                return False
            holds.discard(hold)
            if not holds:
                del self._held[(hold.kind, hold.organization_id)]
            return True

    def wake(self, kind, organization_id):
        """Run again every request held on this feed of this organization."""
        key = (kind, organization_id)
        with self._changed:
            self._heard[key] = next(self._count)
            holds = self._held.pop(key, set())
        for hold in holds:
            hold.woken = True
            hold.resume()

    def wake_all(self):
        """Answer every held request now (the worker stops)."""
        with self._changed:
            held, self._held = self._held, {}
        for holds in held.values():
            for hold in holds:
                hold.resume()

    def heard_payload(self, kind):
        """What the listener calls with a notification's payload (an organization's id)."""
        def call(payload):
            try:
                organization_id = int(payload)
            except ValueError:
                return
            self.wake(kind, organization_id)
        return call

    def look_without_listening(self, target):
        """One statement for every organization held: wake those whose feeds moved since the last look.

        An organization looked at for the first time wakes its requests (a change may have come between
        their read and this look); the next looks compare.
        """
        with self._changed:
            organizations = sorted({organization_id for _kind, organization_id in self._held})
            self._heads = {organization_id: self._heads[organization_id]
                           for organization_id in organizations if organization_id in self._heads}
        if not organizations:
            return
        conn = db.connect(target)
        try:
            rows = execute_all(conn, _HEADS_SQL, {"ids": organizations})
        finally:
            conn.close()
        for row in rows:
            heads = (row["changes"], row["events"])
            before = self._heads.get(row["organization_id"])
            self._heads[row["organization_id"]] = heads
            for kind, head, head_before in zip(("changes", "events"), heads, before or (None, None)):
                if before is None or head != head_before:
                    self.wake(kind, row["organization_id"])

    def _end_waits(self):
        """Resume each held request when its wait ends, or when it is due to look again (woken before)."""
        while True:
            due = []
            with self._changed:
                now = time.monotonic()
                while self._timers and self._timers[0][0] <= now:
                    _at, _sequence, hold = heapq.heappop(self._timers)
                    holds = self._held.get((hold.kind, hold.organization_id), set())
                    if hold in holds:
                        holds.discard(hold)
                        if not holds:
                            del self._held[(hold.kind, hold.organization_id)]
                        due.append(hold)
                if not due:
                    self._changed.wait(self._timers[0][0] - now if self._timers else None)
            for hold in due:
                hold.resume()


WAITERS = Waiters()


def listen(target):
    """Have the process's listener wake the held requests (once per process; target: the listener's)."""
    listener = guard.kept_principals().listener
    if getattr(listener, "waiters", None) is not WAITERS:
        for kind, channel in CHANNELS.items():
            listener.hear(channel, WAITERS.heard_payload(kind), lambda: WAITERS.look_without_listening(target))
        listener.waiters = WAITERS
    return listener


def parse_wait(query):
    """The hold a request asks for, in seconds (0: none)."""
    return query.get("wait") or 0


def before_reading(kind, organization_id):
    """What the view notes before it reads: the feed's last notification heard (see Waiters.add)."""
    return WAITERS.heard(kind, organization_id)


def answer(response, kind, organization_id, wait, nothing_new, heard_before):
    """`response` with its X-Poll-Interval, offered to the worker to hold when it has `nothing_new` and a wait.

    A request run again after its hold answers (X-Poll-Interval 0: the next call can wait at once), unless
    its feed was heard and it still finds nothing (a transaction begun before the change still runs, so the
    change is beyond the feed's horizon): then it is held again for the rest of its wait, looking again
    every RECHECK_SECONDS.
    """
    held = request.environ.get(HELD)
    offer = request.environ.get(HOLD)
    interval = 0 if held is not None or not nothing_new else POLL_SECONDS
    if nothing_new and wait and offer is not None:
        now = time.monotonic()
        if held is None:
            ends_at = now + wait * (1 + JITTER * random.random())
            recheck_at = None
        else:
            ends_at = held.ends_at
            recheck_at = now + RECHECK_SECONDS if held.woken or held.recheck_at is not None else None
        if ends_at - now > 0.05:
            hold = Hold(kind, organization_id, ends_at, g.authentication,
                        recheck_at=recheck_at if recheck_at is None or recheck_at < ends_at else None)
            listen(database())
            if offer(hold, heard_before):
                request.environ[HOLDING] = True
                interval = 0
            elif held is None:
                interval = FULL_POLL_SECONDS
    response.headers["X-Poll-Interval"] = str(interval)
    return response


def still_allowed():
    """On a request run again after its hold: its token is still valid (it was counted on its first run only)."""
    if request.environ.get(HELD) is None:
        return
    token = guard.bearer_token()
    found = guard.kept_principals().get(tokens.fingerprint(token), guard.look_up) if token else None
    if found is None:
        raise InvalidToken("The API token is invalid, expired or revoked, or its user left the organization.")

