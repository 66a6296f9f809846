"""Who each token is, kept per process, so that a warm process decides a request without a statement.

What token_principal (schema.sql) answered for a fingerprint is kept while nothing says it changed: every
write that can change an answer (a token revoked, expired or made, a member removed, a pin moved, an
organization deleted) notifies CHANNEL from a trigger, and one connection per process LISTENs to it
(`Listener`) and drops everything kept. While that connection is not listening (a transaction pooler
between, where LISTEN cannot work; the database away), an answer is kept UNHEARD_SECONDS only, so a change
is seen everywhere within two seconds either way. A token's expiry is checked against the clock on every
use. A token's last use is written in batches (`Principals.last_uses`), every LAST_USE_SECONDS at most.

The same connection hears the feeds' channels for the requests held until their organization's feed
changes (api/waiting.py): `Listener.hear` names a channel and what to call with each payload; while the
process cannot listen, `Listener.unheard` is called about once a second instead, to look for changes itself.
"""
import logging
import os
import select
import threading
import time
import weakref

import psycopg2

from models import db, deadline

log = logging.getLogger(__name__)

CHANNEL = "shiptrack_principals"  # notify_principals (schema.sql) notifies it
# The feeds' channels (notify_changes, notify_events: the organization's id), heard for api/waiting.py.
FEED_CHANNELS = ("shiptrack_changes", "shiptrack_events")
APPLICATION_NAME = "shiptrack-api-listener"  # the listening connection's, in pg_stat_activity
KEPT_SECONDS = 60.0               # the longest an answer is kept while the process hears CHANNEL
UNHEARD_SECONDS = 1.0             # ... and while it does not
KEPT_PRINCIPALS = 10_000          # past this many, everything kept is dropped (fingerprints sent once each)
LAST_USE_SECONDS = 60.0           # a token's last use is written this often at most, per process
LISTEN_RETRY_SECONDS = (1.0, 30.0)  # the first wait before listening again, and the longest
IDLE_SECONDS = 30.0               # how long the listener waits for a notification before it checks again
UNHEARD_POLL_SECONDS = 1.0        # how often `unheard` is called while the process cannot listen

# last uses: each token's last use, never moved back (two processes write theirs in any order).
_LAST_USES_SQL = """
UPDATE tokens t SET last_used_at = u.used_at
  FROM unnest(%(ids)s::bigint[], %(used_at)s::timestamptz[]) AS u (id, used_at)
 WHERE t.id = u.id AND (t.last_used_at IS NULL OR t.last_used_at < u.used_at)
"""


def record_last_uses(conn, used_at):
    """Write the last uses `used_at` ({token id: aware datetime}) where they are later than the stored ones."""
    ids = sorted(used_at)
    db.execute(conn, _LAST_USES_SQL, {"ids": ids, "used_at": [used_at[token_id] for token_id in ids]})


class Principals:
    """The principals one application keeps, by token fingerprint, and the last uses it has not written."""

    def __init__(self, listener):
        self.listener = listener
        self._kept = {}
        self._generation = 0
        self._used = {}
        self._written_at = time.monotonic()
        self._lock = threading.Lock()
        listener.subscribe(self)

    def get(self, fingerprint, lookup):
        """The principal of `fingerprint` (None: no valid token), as kept or as `lookup(fingerprint)` answers."""
        now = time.monotonic()
        epoch = self.listener.epoch()
        kept = self._kept.get(fingerprint)
        if kept is not None:
            found, kept_at, heard_in = kept
            if now - kept_at < (KEPT_SECONDS if heard_in is not None and heard_in == epoch else UNHEARD_SECONDS):
                return _unexpired(found)
        generation = self._generation
        found = lookup(fingerprint)
        self.listener.start()  # once the database has answered: listening needs it too
        with self._lock:
            # Kept only if nothing was heard meanwhile: a change heard during the lookup may postdate its answer.
            if generation == self._generation:
                if len(self._kept) >= KEPT_PRINCIPALS:
                    self._kept = {}
                self._kept[fingerprint] = (found, now, epoch)
        return _unexpired(found)

    def forget(self):
        """Drop every principal kept (something changed, or the listener may have missed a change)."""
        with self._lock:
            self._kept = {}
            self._generation += 1

    def used(self, token_id, at):
        """Note a token's use at `at` (an aware datetime)."""
        self._used[token_id] = at

    def last_uses(self):
        """{token id: last use} to write now (once every LAST_USE_SECONDS), else None; taken, so written once."""
        if time.monotonic() - self._written_at < LAST_USE_SECONDS or not self._used:
            return None
        with self._lock:
            used, self._used, self._written_at = self._used, {}, time.monotonic()
        return used


def _unexpired(found):
    if found is not None and found["expires_at"] is not None and found["expires_at"].timestamp() <= time.time():
        return None
    return found


class Listener:
    """One connection per process LISTENing on CHANNEL, in a thread of its own, heard by every Principals."""

    def __init__(self, target):
        self.target = target
        self._subscribers = weakref.WeakSet()
        self._epoch = None           # a new number each time listening (re)starts; None while not listening
        self._count = 0
        self._thread = None
        self._pid = None
        self._lock = threading.Lock()
        self._hearers = {}           # channel: what to call with each of its payloads (hear)
        self._unheard = None         # what to call about once a second while not listening

    def subscribe(self, principals):
        self._subscribers.add(principals)

    def hear(self, channel, call, unheard):
        """Call `call(payload)` for each notification on `channel` (one of FEED_CHANNELS), and `unheard()`
        about every UNHEARD_POLL_SECONDS while this process cannot listen."""
        self._hearers[channel] = call
        self._unheard = unheard

    def epoch(self):
        """The number of the current listening, None while not listening (or not yet listening in this process)."""
        return self._epoch if self._pid == os.getpid() else None

    def start(self):
        """Start listening in this process (its thread), unless it does already."""
        if self._pid == os.getpid():
            return
        with self._lock:
            if self._pid == os.getpid():
                return
            self._pid, self._epoch = os.getpid(), None
            self._thread = threading.Thread(target=self._run, name="shiptrack-principals", daemon=True)
            self._thread.start()

    def _tell(self):
        for principals in list(self._subscribers):
            principals.forget()

    def _run(self):
        deadline.aside()  # the breaker is the requests' (models/breaker.py): this thread neither opens nor closes it
        wait = LISTEN_RETRY_SECONDS[0]
        while self._heard():
            conn = self._listen()
            if conn is None:
                self._poll_unheard(None)
                return
            if conn is False:
                self._poll_unheard(wait)
                wait = min(LISTEN_RETRY_SECONDS[1], wait * 2)
                continue
            wait = LISTEN_RETRY_SECONDS[0]
            try:
                self._hear(conn)
            except (db.DatabaseUnavailable, psycopg2.Error, OSError) as error:
                log.warning("lost the connection that hears changes to tokens (%s); they are looked up again "
                            "every %s s until it is back", error, UNHEARD_SECONDS)
            finally:
                self._epoch = None
                conn.close()

    def _poll_unheard(self, seconds):
        """Call `unheard` every UNHEARD_POLL_SECONDS for `seconds` (None: for as long as the process runs)."""
        ends = None if seconds is None else time.monotonic() + seconds
        while ends is None or time.monotonic() < ends:
            time.sleep(UNHEARD_POLL_SECONDS if ends is None else min(UNHEARD_POLL_SECONDS, ends - time.monotonic()))
            if self._unheard is not None:
                try:
                    self._unheard()
                except (db.DatabaseUnavailable, psycopg2.Error) as error:
                    log.info("could not look for changes to the feeds (%s); trying again in %s s", error,
                             UNHEARD_POLL_SECONDS)
            if ends is None and not self._heard():
                return

    def _heard(self):
        """Whether an application still keeps principals; when none does, the thread ends (a new one starts)."""
        if self._subscribers:
            return True
        with self._lock:
            self._pid = None
        return False

    def _listen(self):
        """A connection listening on CHANNEL; False when none can be made now; None when none ever can."""
        try:
            conn = db.connect(self.target)
            if conn.target.pooler == "transaction":
                conn.close()
                log.warning("changes to tokens cannot be heard through a transaction pooler (LISTEN needs a "
                            "session): tokens are looked up again every %s s; set DATABASE_LISTEN_URL to a direct "
                            "URL to keep them longer", UNHEARD_SECONDS)
                return None
            conn.autocommit = True
            with conn.cursor() as cur:
                for channel in (CHANNEL, *FEED_CHANNELS):
                    cur.execute(f"LISTEN {channel}")
        except (db.DatabaseUnavailable, psycopg2.Error):
            return False
        # What was kept before is kept UNHEARD_SECONDS only (its epoch is another): a change made before
        # listening began is not heard.
        self._count += 1
        self._epoch = self._count
        return conn

    def _hear(self, conn):
        while True:
            readable, _, _ = select.select([conn], [], [], IDLE_SECONDS)
            conn.poll()
            if conn.notifies:
                heard, conn.notifies[:] = list(conn.notifies), []
                if any(notify.channel == CHANNEL for notify in heard):
                    self._tell()
                for notify in heard:
                    if notify.channel in self._hearers:
                        self._hearers[notify.channel](notify.payload)
            elif not readable:
                if not self._heard():
                    return
                with conn.cursor() as cur:  # nothing for a while: is the connection still there?
                    cur.execute("SELECT 1")


# One Listener per process and database URL: every application of the process on that URL shares it.
_listeners = {}
_listeners_lock = threading.Lock()


def listener(target):
    """The process's Listener of `target` (a models.db.Target)."""
    with _listeners_lock:
        found = _listeners.get(target.url)
        if found is None:
            found = _listeners[target.url] = Listener(target)
        return found
