"""The delivery loop: render new events, claim due deliveries, send them concurrently, record outcomes.

One database connection is used by the loop only; requests run on a thread pool
and hand their outcomes back through a queue, so recording is batched and no
request ever holds a connection or a transaction open.

A lost database connection (a restart, a failover, pg_terminate_backend) never ends the loop:
it reconnects with backoff, and the outcomes of requests that finished meanwhile stay in memory
until they are recorded, so a blip sends nothing twice.
"""
import logging
import queue
import random
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import psycopg2

from api.ids import PREFIXES, format_id
from delivery import housekeeping, metrics, recording
from delivery.attempts import send_delivery, utcnow
from delivery.listener import Listener
from delivery.outbox import RENDER_BATCH, render_pending
from delivery.wakeup import Wakeup
from models import db, webhook_deliveries

log = logging.getLogger("delivery")

RENDER_SECONDS = 0.1  # a turn of the loop renders this long at most, then records and claims
RENDER_IDLE_SECONDS = 0.2
# Reconnecting after a lost connection: the first try at once, then waits doubling up to the cap.
RECONNECT_FIRST_SECONDS = 0.1
RECONNECT_MAX_SECONDS = 5.0
# Due work this loop could not claim (another process holds the endpoint's cap): look again this often.
BLOCKED_POLL_SECONDS = 0.25


def connection_lost(error, conn=None):
    """True when a database error means the connection is gone or not answering (models.db.classify).

    A setup error (credentials, database, a pooler's configuration) raises DatabaseSetupError: waiting
    does not fix it. A failed statement (a deadlock, a serialization failure, a bug) is False.
    """
    kind = db.classify(error, conn)
    if kind == db.SETUP:
        raise db.DatabaseSetupError(db.describe(error)) from error
    return kind in (db.LOST, db.TIMEOUT)


DatabaseUnavailable = db.DatabaseUnavailable


class Dispatcher:
    """Runs cron passes (`run_pass`) or the long-running loop (`watch`)."""

    def __init__(self, settings, sender=None, clock=utcnow):
        self.settings, self.clock = settings, clock
        self.sender = sender or settings.make_sender()
        self.conn = self._connect()
        self.executor = ThreadPoolExecutor(settings.workers, thread_name_prefix="webhook")
        self.in_flight = Counter()
        self.results = queue.SimpleQueue()
        self.unrecorded = []  # finished requests whose recording has not committed yet
        self.reconnects = 0
        self.unavailable = False  # gave up waiting for the database
        self.wakeup = Wakeup()
        self.stopping = False
        # Render at once when told (NOTIFY, more waiting), else look for new events this often.
        self._render_hint, self._next_render = True, 0.0

    def stop(self):
        """Ask the loop to finish what is in flight and return (safe from a signal handler)."""
        self.stopping = True
        self.wakeup.wake()

    def _connect(self):
        # The claim (two statements sent together) is a transaction by itself: no BEGIN and COMMIT round
        # trips. Everything else runs in explicit transactions (db.transaction).
        try:
            conn = db.connect(self.settings.target)
        except psycopg2.Error as error:
            connection_lost(error)  # raises on a setup error
            raise
        conn.autocommit = True
        return conn

    def reconnect(self, error, until=None):
        """Replace a lost connection, waiting with backoff; DatabaseUnavailable past `until` (monotonic)."""
        log.warning("database connection lost, reconnecting; %s requests in flight and %s outcomes kept "
                    "error=%r", sum(self.in_flight.values()), len(self.unrecorded) + self.results.qsize(),
                    str(error).strip())
        try:
            self.conn.close()
        except psycopg2.Error:
            pass
        wait = RECONNECT_FIRST_SECONDS
        while True:
            try:
                self.conn = self._connect()
            except psycopg2.OperationalError as failure:
                connection_lost(failure)  # raises on a setup error
                if until is not None and time.monotonic() + wait > until:
                    self.unavailable = True
                    raise DatabaseUnavailable(str(failure).strip()) from None
                log.warning("database unreachable, retrying in %.1f s error=%r", wait, str(failure).strip())
                self.pause(wait * random.uniform(0.5, 1.0))  # jitter: many workers do not come back at once
                wait = min(RECONNECT_MAX_SECONDS, wait * 2)
                continue
            self.reconnects += 1
            self._render_hint = True  # notifications sent meanwhile are lost; look for work at once
            log.info("database connection restored; recording %s outcomes kept",
                     len(self.unrecorded) + self.results.qsize())
            return

    def guarded(self, turn, until=None):
        """Run `turn()`; on a lost connection, reconnect (see reconnect) and return None."""
        try:
            return turn()
        except (psycopg2.OperationalError, psycopg2.InterfaceError) as error:
            if not connection_lost(error, self.conn):
                raise
            if until is None or (until == float("inf") and self.stopping):
                # Outcomes are worth keeping for as long as the leases last; then the work is sent again anyway.
                until = time.monotonic() + self.settings.lease.total_seconds()
            self.reconnect(error, until)
            return None

    def close(self):
        """Wait for requests in flight, record them, release everything."""
        # Outcomes are kept for as long as the leases last: after that another pass sends the work again.
        until = time.monotonic() + self.settings.lease.total_seconds()
        try:
            while self.in_flight and not self.unavailable:
                self.wait(1.0)
                self.guarded(lambda: self.record_and_claim(claiming=False), until)
        except DatabaseUnavailable:
            pass
        if self.in_flight:
            log.error("database unreachable; %s outcomes not recorded (their deliveries are retried when "
                      "the leases run out)", len(self.unrecorded) + self.results.qsize())
        self.executor.shutdown(wait=True)
        self.conn.close()
        self.sender.close()
        self.wakeup.close()

    def render(self):
        """Render new events for up to RENDER_SECONDS, so claims keep flowing meanwhile; returns how many."""
        done, until = 0, time.monotonic() + RENDER_SECONDS
        while time.monotonic() < until:
            with db.transaction(self.conn):
                count = render_pending(self.conn, self.clock(), RENDER_BATCH)
            done += count
            if count < RENDER_BATCH:
                self._render_hint, self._next_render = False, time.monotonic() + RENDER_IDLE_SECONDS
                break
        return done

    def _claim(self):
        """Lease as much due work as there are free workers (one round trip, its own transaction).

        The per-endpoint cap is counted in the database over every process's leases.
        """
        total_free = self.settings.workers - sum(self.in_flight.values())
        if total_free <= 0 or self.stopping:
            return []
        now = self.clock()
        claimed = webhook_deliveries.claim_due(self.conn, now, now + self.settings.lease, str(uuid.uuid4()),
                                               self.settings.per_endpoint, total_free)
        return [self.settings.secret_keys.opened(delivery) for delivery in claimed]  # SecretKeyError ends the run

    def _send(self, delivery):
        try:
            result = send_delivery(self.sender, delivery, self.clock)
        except Exception:  # a bug must not lose the slot; the lease brings the work back
            log.exception("sender crashed event_id=%s endpoint_id=%s",
                          format_id(PREFIXES["webhook_event"], delivery.event_id),
                          format_id(PREFIXES["webhook_endpoint"], delivery.endpoint_id))
            result = None
        metrics.observe_attempt(result)
        self.results.put((delivery, result))
        if self.wakeup.asleep:  # a write per request would cost the loop the lock while it is busy anyway
            self.wakeup.wake()

    def _finished(self):
        done = []
        while True:
            try:
                done.append(self.results.get_nowait())
            except queue.Empty:
                return done

    def record_and_claim(self, claiming=True):
        """Record finished requests, then lease new work and start sending it: a round trip each.

        Outcomes leave memory only once their transaction committed: when the connection is lost
        they stay in `unrecorded` and are recorded after reconnecting (recording twice is harmless).
        The recording commits only when this process says so (a pass killed before that records
        nothing, and its requests are sent again when the leases run out). The claim is its own
        transaction, after the recording, so its count of each endpoint's leases already leaves out
        the requests just recorded.
        """
        self.unrecorded.extend(self._finished())
        done = self.unrecorded
        if done:
            with db.transaction(self.conn):
                recording.record(self.conn, [result for _delivery, result in done if result is not None])
        self.unrecorded = []
        for delivery, _result in done:
            self.in_flight[delivery.endpoint_id] -= 1
            if self.in_flight[delivery.endpoint_id] <= 0:
                del self.in_flight[delivery.endpoint_id]
        claimed = self._claim() if claiming else []
        for delivery in claimed:
            self.in_flight[delivery.endpoint_id] += 1
            self.executor.submit(self._send, delivery)
        return len(done) + len(claimed)

    def pause(self, seconds):
        """Back off for the whole of `seconds`; a request finishing meanwhile does not cut it short."""
        # Not wait(): a finished request's outcome needs the database this backs off from.
        time.sleep(seconds)

    def wait(self, timeout, also=()):
        """Sleep until a request finishes, one of `also` is readable, or `timeout` passes."""
        # A request that finished before the loop fell asleep wrote nothing: its outcome is already queued.
        self.wakeup.sleep(timeout, also, ready=lambda: not self.results.empty())

    def housekeeping(self):
        """Retention and e-mails about failing and disabled endpoints (delivery/housekeeping.py)."""
        housekeeping.keep_tidy(self.conn, self.settings, self.clock)

    def notify_disabled(self):
        """E-mails about failing and disabled endpoints only (the end of a pass)."""
        housekeeping.notify_endpoint_admins(self.conn, self.settings, self.clock)

    def step(self, claiming=True):
        """One turn of the loop; returns how much work it did."""
        done = 0
        if self._render_hint or time.monotonic() >= self._next_render:
            done += self.render()
        return done + self.record_and_claim(claiming)

    def run_pass(self, seconds=None):
        """One bounded cron pass: deliver what is due, claim nothing new after `seconds`, then drain."""
        deadline = time.monotonic() + (self.settings.pass_seconds if seconds is None else seconds)
        self.guarded(self.housekeeping, deadline)
        while True:
            claiming = time.monotonic() < deadline and not self.stopping
            # While nothing is in flight there is nothing to keep: give up on the database at the deadline.
            holding = self.in_flight or self.unrecorded
            done = self.guarded(lambda: self.step(claiming), None if holding else max(deadline, time.monotonic() + 1))
            if done is None:
                continue  # reconnected: record what was kept, look for work again
            if not self.in_flight and not self.unrecorded and (not done or not claiming):
                break
            if not done:
                self.wait(0.5)
        self.guarded(self.notify_disabled, time.monotonic() + 1)

    def watch(self, idle_seconds=5.0, housekeeping_seconds=60.0):
        """Deliver continuously, woken by NOTIFY from the outbox triggers, until `stopping` is set.

        Survives a lost database: both connections are made again (with backoff) and nothing
        finished meanwhile is forgotten.
        """
        listener = Listener(self.settings.listen_target)
        if listener.connect():
            self._render_hint = True  # anything committed while not listening
        next_housekeeping = 0.0
        try:
            while not self.stopping:
                if time.monotonic() >= next_housekeeping:
                    self.guarded(self.housekeeping, until=float("inf"))
                    next_housekeeping = time.monotonic() + housekeeping_seconds
                # Every turn, not only when idle: while outcomes keep coming (a busy or failing endpoint),
                # the loop never idles, and new events would wait for the periodic render (0.2 s).
                if listener.heard():
                    self._render_hint = True
                done = self.guarded(self.step, until=float("inf"))
                if done is None or done:
                    continue
                timeout = self.guarded(lambda: self._idle_timeout(idle_seconds), until=float("inf"))
                if timeout is None:
                    continue
                if listener.conn is None:
                    if listener.connect():
                        self._render_hint, timeout = True, 0.0
                    else:
                        timeout = min(1.0, timeout or 1.0)
                self.wait(timeout, also=listener.sockets())
        finally:
            listener.close()

    def _idle_timeout(self, idle_seconds):
        if self.in_flight:
            return idle_seconds
        with db.transaction(self.conn):
            due = webhook_deliveries.next_due_at(self.conn)
        if due is None:
            return idle_seconds
        wait = (due - self.clock()).total_seconds()
        # Due already and still not claimed: another process holds that endpoint's cap (or its lock).
        return min(idle_seconds, wait if wait > 0 else BLOCKED_POLL_SECONDS)
