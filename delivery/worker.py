"""The delivery process: one loop, one method per concern, one database connection.

The schedule (`step`, called by `run_pass` and `watch`): render new events when told or every 0.2 s
(`render`), record the requests that finished (`record`), then claim due work and send it on the thread
pool (`claim_and_send`); `housekeep` (retention, old rate-limit windows) and `email` (failing and disabled
endpoints) run when a pass starts and every minute under `--watch`. A lost connection never ends the
process: the link (delivery/connection.py) reconnects with backoff, and the outcomes of requests that
finished meanwhile stay in memory until their recording commits, so a blip sends nothing twice.
"""
import logging
import queue
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

from delivery import recording
from delivery.connection import DatabaseUnavailable, Link, Listener, Wakeup
from delivery.outbox import RENDER_BATCH, render_pending
from delivery.secret_key import NOT_SENT, SecretKeyError
from delivery.sender import Outcome, Result, observe_attempt, send_delivery, utcnow
from models import db, events, rate_limits, webhook_deliveries

log = logging.getLogger("delivery")

__all__ = ["DatabaseUnavailable", "Dispatcher"]

RENDER_SECONDS = 0.1  # a turn renders this long at most, so claims keep flowing meanwhile
RENDER_IDLE_SECONDS = 0.2
# Due work this process could not claim (another process holds the endpoint's cap): look again this often.
BLOCKED_POLL_SECONDS = 0.25
# How often the leases of processes that are gone (killed, or their session lost) are freed.
ORPHANS_SECONDS = 1.0


class Dispatcher:
    """The delivery process: runs its schedule as one bounded pass (`run_pass`) or continuously (`watch`)."""

    def __init__(self, settings, sender=None, clock=utcnow):
        self.settings, self.clock = settings, clock
        self.lease_seconds = settings.lease.total_seconds()
        self.link = Link(settings.target, kept=self._kept, on_reconnect=self._reconnected)
        self.sender = sender or settings.make_sender()
        self.wakeup = Wakeup()
        self.executor = ThreadPoolExecutor(settings.workers, thread_name_prefix="webhook")
        self.stopping = False  # SIGTERM / SIGINT: claim nothing new, record what is in flight, return
        self.claiming = True  # False once stopping, or once a pass is past its time (draining)
        self.render_now, self.render_at = True, 0.0  # told there is news; else render at this monotonic time
        self.orphans_at = 0.0  # when to free orphaned leases next (monotonic)
        self.in_flight = Counter()  # requests sent and not recorded yet, per endpoint
        self.results = queue.SimpleQueue()  # (delivery, Result or None when the sender crashed), from the pool
        self.unrecorded = []  # finished requests whose recording has not committed yet
        # The process's key, whose session advisory lock it holds on `held_on`, the link's connection (taken
        # again after a reconnect): its leases name it, and another process frees them at once if it dies.
        self.holder, self.held_on = None, None
        self.unopened = set()  # endpoints whose secret would not open, said once each
        self.listen_now = False  # the link reconnected: a listener waiting to try again tries at once

    def _kept(self):
        return sum(self.in_flight.values()), len(self.unrecorded) + self.results.qsize()

    def _reconnected(self):
        # Notifications sent meanwhile are lost: look for work at once, and listen again at once.
        self.render_now = self.listen_now = True

    def _leases(self):
        """A deadline for a lost connection while outcomes are held: the lease's length from now.

        Past it the work is sent again by another pass anyway, so the outcomes are not worth keeping.
        """
        return time.monotonic() + self.lease_seconds

    def _patience(self, deadline):
        """How long a pass waits for a lost connection: the leases' length while it holds outcomes, else `deadline`."""
        return self._leases() if self.in_flight or self.unrecorded else deadline

    def stop(self):
        """Ask the process to finish what is in flight and return (safe from a signal handler)."""
        self.stopping, self.claiming = True, False
        # A watch waits for the database for ever, until told to stop; then only while it holds outcomes.
        self.link.give_up_at = self._patience(time.monotonic())
        self.wakeup.wake()

    def close(self):
        """Wait for requests in flight, record them, and release everything."""
        deadline = self._leases()
        try:
            while self.in_flight and self.link.conn is not None:
                self.wait(1.0)
                self.link.run(self.record, deadline)
        except DatabaseUnavailable:
            pass
        if self.in_flight:
            log.error("database unreachable; %s outcomes not recorded (their deliveries are retried when "
                      "the leases run out)", self._kept()[1])
        self.executor.shutdown(wait=True)
        self.link.close()
        self.sender.close()
        self.wakeup.close()

    def run_pass(self, seconds=None):
        """One bounded cron pass: deliver what is due, claim nothing new after `seconds`, then drain."""
        deadline = time.monotonic() + (self.settings.pass_seconds if seconds is None else seconds)
        self.link.run(self.housekeep, self._patience(deadline))
        self.link.run(self.email, self._patience(deadline))
        while True:
            if time.monotonic() >= deadline:
                self.claiming = False  # draining: what is in flight is recorded, nothing new is claimed
            done = self.link.run(self.step, self._patience(max(deadline, time.monotonic() + 1)))
            if done is None:
                continue  # reconnected: record what was kept, look for work again
            if not (self.in_flight or self.unrecorded) and (not done or not self.claiming):
                break
            if not done:
                self.wait(0.5)
        self.link.run(self.email, time.monotonic() + 1)

    def watch(self, idle_seconds=5.0, housekeeping_seconds=60.0):
        """Deliver continuously, woken by NOTIFY from the outbox triggers, until stopped.

        Survives a lost database for as long as it runs: both connections are made again (with backoff)
        and nothing finished meanwhile is forgotten.
        """
        housekeeping_at = 0.0
        listener = Listener(self.settings.listen_target)
        if listener.connect():
            self.render_now = True  # anything committed while not listening
        try:
            while not self.stopping:
                if time.monotonic() >= housekeeping_at:
                    # Set first: a turn cut by a lost connection waits for the next one, as a finished one does.
                    housekeeping_at = time.monotonic() + housekeeping_seconds
                    self.link.run(self.housekeep, None)
                    self.link.run(self.email, None)
                # Every turn, not only when idle: while outcomes keep coming (a busy or failing endpoint),
                # the loop never idles, and new events would wait for the periodic render.
                if listener.heard():
                    self.render_now = True
                done = self.link.run(self.step, None)
                if done is None or done:
                    continue
                timeout = self.link.run(lambda: self.next_claim_in(idle_seconds), None)
                if timeout is None:
                    continue
                if self.listen_now:  # the database is back: a listener waiting out its retry tries now
                    listener.retry_now()
                    self.listen_now = False
                if listener.conn is None:
                    if listener.connect():
                        self.render_now, timeout = True, 0.0
                    else:
                        timeout = min(1.0, timeout)
                self.wait(timeout, also=listener.sockets())
        finally:
            listener.close()

    def step(self):
        """One turn of the schedule: render when due, record, claim and send; returns how much work it did."""
        due = self.render_now or time.monotonic() >= self.render_at
        return (self.render() if due else 0) + self.record_and_claim()

    def record_and_claim(self):
        """Record finished requests, then lease new work and start sending it.

        The claim is its own transaction, after the recording, so its count of each endpoint's
        leases already leaves out the requests just recorded.
        """
        return self.record() + self.claim_and_send()

    def wait(self, timeout, also=()):
        """Sleep until a request finishes, one of `also` is readable, or `timeout` passes."""
        # A request that finished before the loop fell asleep wrote nothing: its outcome is already queued.
        self.wakeup.sleep(timeout, also, ready=lambda: not self.results.empty())

    def render(self):
        """Render new events and fan them out for up to RENDER_SECONDS; returns how many events."""
        conn, done, until = self.link.conn, 0, time.monotonic() + RENDER_SECONDS
        while time.monotonic() < until:
            with db.transaction(conn):
                count = render_pending(conn, self.clock(), RENDER_BATCH)
            done += count
            if count < RENDER_BATCH:
                self.render_now, self.render_at = False, time.monotonic() + RENDER_IDLE_SECONDS
                break
        return done

    def record(self):
        """Record the requests that finished, in one transaction; returns how many.

        Outcomes leave memory only once their transaction committed: when the connection is lost they
        stay in `unrecorded` and are recorded after reconnecting (recording twice is harmless).
        """
        while True:
            try:
                self.unrecorded.append(self.results.get_nowait())
            except queue.Empty:
                break
        done = self.unrecorded
        if done:
            with db.transaction(self.link.conn):
                recording.record(self.link.conn, [result for _delivery, result in done if result is not None])
        self.unrecorded = []
        for delivery, _result in done:  # their workers are free
            self.in_flight[delivery.endpoint_id] -= 1
            if self.in_flight[delivery.endpoint_id] <= 0:
                del self.in_flight[delivery.endpoint_id]
        return len(done)

    def claim_and_send(self):
        """Lease as much due work as there are free workers and start sending it; returns how many.

        One round trip, its own transaction; the per-endpoint cap is counted over every process's leases.
        Once a second, first, the leases of processes that are gone are made due (one more round trip).
        """
        if not self.claiming:
            return 0
        free = self.settings.workers - sum(self.in_flight.values())
        self._hold()
        now = self.clock()
        if time.monotonic() >= self.orphans_at:
            self.orphans_at = time.monotonic() + ORPHANS_SECONDS
            webhook_deliveries.free_orphaned(self.link.conn, now, self.holder)
        if free <= 0:
            return 0
        claimed = webhook_deliveries.claim_due(self.link.conn, now, now + self.settings.lease, str(uuid.uuid4()),
                                               self.settings.per_endpoint, free, self.holder)
        for delivery in claimed:
            self.in_flight[delivery.endpoint_id] += 1
            try:
                opened = self.settings.secret_keys.opened(delivery)
            except SecretKeyError as error:
                self._not_sent(delivery, error)
                continue
            self.executor.submit(self._send, opened)
        return len(claimed)

    def _hold(self):
        """Hold the process's key on the link's connection: at the first claim, and again after a reconnect.

        Through a transaction pooler a session lock would stay on whichever server session took it:
        there the leases name no holder and run out by their time.
        """
        conn = self.link.conn
        if self.held_on is conn or conn.target.pooler == "transaction":
            return
        self.holder, held = webhook_deliveries.hold(conn, self.holder)
        if held:  # else the old session still holds it, keeping the leases alive: try again next turn
            self.held_on = conn

    def _not_sent(self, delivery, error):
        """A delivery whose endpoint's secret will not open fails at once, retried on the schedule (said once)."""
        if delivery.endpoint_id not in self.unopened:
            self.unopened.add(delivery.endpoint_id)
            named = recording.fields(delivery)["endpoint_id"]
            log.error("the secret of this endpoint will not open with this process's secret key; its deliveries "
                      "fail and are retried until a key that opens it is set endpoint_id=%s error=%r",
                      named, str(error), extra={"endpoint_id": named})
        now = self.clock()
        self.results.put((delivery, Result(delivery, now, now, Outcome(False, None, NOT_SENT, None, None, 0))))

    def _send(self, delivery):
        """On a pool thread: send one delivery and queue its outcome for `record`."""
        try:
            result = send_delivery(self.sender, delivery, self.clock)
        except Exception:  # a bug must not lose the slot; the lease brings the work back
            fields = recording.fields(delivery)
            log.exception("sender crashed event_id=%s endpoint_id=%s", fields["event_id"], fields["endpoint_id"],
                          extra=fields)
            result = None
        observe_attempt(result)
        self.results.put((delivery, result))
        if self.wakeup.asleep:  # a write per request would cost the loop the lock while it is busy anyway
            self.wakeup.wake()

    def next_claim_in(self, idle_seconds):
        """Seconds until claiming may find work, at most `idle_seconds` (a finishing request wakes the loop)."""
        if self.in_flight:
            return idle_seconds
        with db.transaction(self.link.conn):
            due = webhook_deliveries.next_due_at(self.link.conn)
        if due is None:
            return idle_seconds
        wait = (due - self.clock()).total_seconds()
        # Due already and still not claimed: another process holds that endpoint's cap (or its lock).
        return min(idle_seconds, wait if wait > 0 else BLOCKED_POLL_SECONDS)

    def housekeep(self):
        """Keep the tables small: 30 days of attempts and finished events, the rate-limit windows still counted."""
        conn, before = self.link.conn, self.clock() - recording.RETENTION
        with db.transaction(conn):
            attempts = webhook_deliveries.delete_old_attempts(conn, before)
            old = events.delete_old_events(conn, before)
        if attempts or old:
            log.info("retention deleted attempts=%s events=%s", attempts, old)
        with db.transaction(conn):
            rate_limits.prune(conn, self.settings.rate_limit_window)

    def email(self):
        """E-mail the admins about endpoints failing for 24 hours and endpoints the 3-day rule disabled."""
        recording.notify_endpoint_admins(self.link.conn, self.settings, self.clock)
