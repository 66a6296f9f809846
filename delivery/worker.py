"""The delivery loop: render new events, claim due deliveries, send them concurrently, record outcomes.

One database connection is used by the loop only; requests run on a thread pool
and hand their outcomes back through a queue, so recording is batched and no
request ever holds a connection or a transaction open.
"""
import logging
import os
import queue
import select
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

from api.ids import PREFIXES, format_id
from delivery import mailer, recording, retry
from delivery.attempts import send_delivery, utcnow
from delivery.outbox import RENDER_BATCH, render_pending
from models import db, events, webhook_deliveries, webhooks

log = logging.getLogger("delivery")

RENDER_SECONDS = 0.1  # a turn of the loop renders this long at most, then records and claims
RENDER_IDLE_SECONDS = 0.2
NOTIFY_CHANNEL = "webhook_events"


class Dispatcher:
    """Runs cron passes (`run_pass`) or the long-running loop (`watch`)."""

    def __init__(self, settings, sender=None, clock=utcnow):
        self.settings, self.clock = settings, clock
        self.sender = sender or settings.make_sender()
        self.conn = db.connect(settings.database_url)
        with self.conn, self.conn.cursor() as cur:
            # A commit lost in a database crash only means a delivery is sent again (receivers
            # expect duplicates); not waiting for the WAL flush halves the cost of each turn.
            cur.execute("SET synchronous_commit = off")
        self.executor = ThreadPoolExecutor(settings.workers, thread_name_prefix="webhook")
        self.in_flight = Counter()
        self.results = queue.SimpleQueue()
        self._wake_read, self._wake_write = os.pipe()
        os.set_blocking(self._wake_read, False)
        os.set_blocking(self._wake_write, False)  # a full pipe already means "wake up"
        self.stopping = False
        # Render at once when told (NOTIFY, more waiting), else look for new events this often.
        self._render_hint, self._next_render = True, 0.0

    def stop(self):
        """Ask the loop to finish what is in flight and return (safe from a signal handler)."""
        self.stopping = True
        self._wake()

    def close(self):
        """Wait for requests in flight, record them, release everything."""
        while self.in_flight:
            self.wait(1.0)
            self.record_and_claim(claiming=False)
        self.executor.shutdown(wait=True)
        self.conn.close()
        self.sender.close()
        os.close(self._wake_read)
        os.close(self._wake_write)

    def render(self):
        """Render new events for up to RENDER_SECONDS, so claims keep flowing meanwhile; returns how many."""
        done, until = 0, time.monotonic() + RENDER_SECONDS
        while time.monotonic() < until:
            with self.conn:
                count = render_pending(self.conn, self.clock(), RENDER_BATCH)
            done += count
            if count < RENDER_BATCH:
                self._render_hint, self._next_render = False, time.monotonic() + RENDER_IDLE_SECONDS
                break
        return done

    def _claim(self):
        """Lease as much due work as there are free workers (in the caller's transaction)."""
        total_free = self.settings.workers - sum(self.in_flight.values())
        if total_free <= 0 or self.stopping:
            return []
        busy = {e: self.settings.per_endpoint - n for e, n in self.in_flight.items() if n > 0}
        now = self.clock()
        return webhook_deliveries.claim_due(self.conn, now, now + self.settings.lease, str(uuid.uuid4()),
                                            busy, self.settings.per_endpoint, total_free)

    def _send(self, delivery):
        try:
            result = send_delivery(self.sender, delivery, self.clock)
        except Exception:  # a bug must not lose the slot; the lease brings the work back
            log.exception("sender crashed event_id=%s endpoint_id=%s",
                          format_id(PREFIXES["webhook_event"], delivery.event_id),
                          format_id(PREFIXES["webhook_endpoint"], delivery.endpoint_id))
            result = None
        self.results.put((delivery, result))
        self._wake()

    def _wake(self):
        try:
            os.write(self._wake_write, b".")
        except BlockingIOError:
            pass

    def _finished(self):
        done = []
        while True:
            try:
                done.append(self.results.get_nowait())
            except queue.Empty:
                return done

    def record_and_claim(self, claiming=True):
        """Record finished requests and lease new work in one transaction, then start sending it."""
        done = self._finished()
        with self.conn:
            recording.record(self.conn, [result for _delivery, result in done if result is not None])
            claimed = self._claim() if claiming else []
        for delivery, _result in done:
            self.in_flight[delivery.endpoint_id] -= 1
            if self.in_flight[delivery.endpoint_id] <= 0:
                del self.in_flight[delivery.endpoint_id]
        for delivery in claimed:
            self.in_flight[delivery.endpoint_id] += 1
            self.executor.submit(self._send, delivery)
        return len(done) + len(claimed)

    def wait(self, timeout, also=()):
        """Sleep until a request finishes, one of `also` is readable, or `timeout` passes."""
        readable, _, _ = select.select([self._wake_read, *also], [], [], max(0.0, timeout))
        if self._wake_read in readable:
            try:
                while os.read(self._wake_read, 4096):
                    pass
            except BlockingIOError:
                pass
        return readable

    def housekeeping(self):
        """Retention (30 days of attempts and finished events) and e-mails about failing and disabled endpoints."""
        before = self.clock() - retry.RETENTION
        with self.conn:
            attempts = webhook_deliveries.delete_old_attempts(self.conn, before)
            old = events.delete_old_events(self.conn, before)
        if attempts or old:
            log.info("retention deleted attempts=%s events=%s", attempts, old)
        self.notify_disabled()

    def notify_disabled(self):
        """E-mail the admins and owners about endpoints failing for 24 hours and endpoints the 3-day rule disabled."""
        now = self.clock()
        self._email("failing", "endpoint failing for 24 hours",
                    lambda: webhook_deliveries.claim_unwarned(self.conn, now, retry.WARN_AFTER,
                                                              retry.FAILURE_RUN_GAP),
                    lambda endpoint, recipients: mailer.failing_message(
                        endpoint, retry.disables_at(endpoint["failing_since"]), recipients, self.settings.smtp_from),
                    webhook_deliveries.mark_warned)
        self._email("disabled", "endpoint disabled", lambda: webhook_deliveries.claim_unnotified(self.conn),
                    lambda endpoint, recipients: mailer.disabled_message(endpoint, recipients,
                                                                         self.settings.smtp_from),
                    webhook_deliveries.mark_notified)

    def _email(self, kind, what, claim, message, mark):
        """Send one e-mail per claimed endpoint and mark it; without SMTP, log and leave it for later."""
        if not self.settings.smtp_host:
            with self.conn:
                for endpoint in claim():
                    log.warning("%s but SHIPTRACK_SMTP_HOST is not set; admins not e-mailed endpoint_id=%s",
                                what, format_id(PREFIXES["webhook_endpoint"], endpoint["id"]))
            return
        with self.conn:
            for endpoint in claim():
                recipients = webhooks.admin_emails(self.conn, endpoint["organization_id"])
                if recipients:
                    try:
                        mailer.send(self.settings.smtp_host, self.settings.smtp_port, message(endpoint, recipients))
                    except OSError as error:  # smtplib errors are OSErrors; try again next pass
                        log.error("%s-endpoint e-mail failed endpoint_id=%s error=%r",
                                  kind, format_id(PREFIXES["webhook_endpoint"], endpoint["id"]), error)
                        continue
                mark(self.conn, endpoint["id"], self.clock())
                log.info("admins e-mailed (%s) endpoint_id=%s recipients=%s",
                         what, format_id(PREFIXES["webhook_endpoint"], endpoint["id"]), len(recipients))

    def step(self, claiming=True):
        """One turn of the loop; returns how much work it did."""
        done = 0
        if self._render_hint or time.monotonic() >= self._next_render:
            done += self.render()
        return done + self.record_and_claim(claiming)

    def run_pass(self, seconds=None):
        """One bounded cron pass: deliver what is due, claim nothing new after `seconds`, then drain."""
        deadline = time.monotonic() + (self.settings.pass_seconds if seconds is None else seconds)
        self.housekeeping()
        while True:
            claiming = time.monotonic() < deadline and not self.stopping
            done = self.step(claiming)
            if not self.in_flight and (not done or not claiming):
                break
            if not done:
                self.wait(0.5)
        self.notify_disabled()

    def watch(self, idle_seconds=5.0, housekeeping_seconds=60.0):
        """Deliver continuously, woken by NOTIFY from the outbox triggers, until `stopping` is set."""
        listener = db.connect(self.settings.database_url)
        listener.autocommit = True
        with listener.cursor() as cur:
            cur.execute(f"LISTEN {NOTIFY_CHANNEL}")
        next_housekeeping = 0.0
        try:
            while not self.stopping:
                if time.monotonic() >= next_housekeeping:
                    self.housekeeping()
                    next_housekeeping = time.monotonic() + housekeeping_seconds
                if self.step():
                    continue
                self.wait(self._idle_timeout(idle_seconds), also=[listener])
                listener.poll()
                if listener.notifies:
                    self._render_hint = True
                    listener.notifies.clear()
        finally:
            listener.close()

    def _idle_timeout(self, idle_seconds):
        if self.in_flight:
            return idle_seconds
        with self.conn:
            due = webhook_deliveries.next_due_at(self.conn)
        if due is None:
            return idle_seconds
        return min(idle_seconds, max(0.0, (due - self.clock()).total_seconds()))
