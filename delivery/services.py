"""The delivery work as services (delivery/service.py): rendering, claiming and sending, recording.

Requests run on a thread pool and hand their outcomes back through a queue, so recording is batched
and no request ever holds a connection or a transaction open. Outcomes leave memory only once their
recording committed, so a lost connection sends nothing twice.
"""
import logging
import queue
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

from api.ids import PREFIXES, format_id
from delivery import metrics, recording
from delivery.attempts import Result, send_delivery
from delivery.outbox import RENDER_BATCH, render_pending
from delivery.secret_key import NOT_SENT, SecretKeyError
from delivery.sender import Outcome
from delivery.service import Service
from models import db, webhook_deliveries

log = logging.getLogger("delivery")

RENDER_SECONDS = 0.1  # a turn renders this long at most, so claims keep flowing meanwhile
RENDER_IDLE_SECONDS = 0.2
# Due work this process could not claim (another process holds the endpoint's cap): look again this often.
BLOCKED_POLL_SECONDS = 0.25
# How often the leases of processes that are gone (killed, or their session lost) are freed.
ORPHANS_SECONDS = 1.0


class Rendering(Service):
    """Renders new events and fans them out: at once when told (NOTIFY, more waiting), else every 0.2 s."""

    name = "rendering"

    def __init__(self, link, clock):
        super().__init__()
        self.link, self.clock = link, clock
        self.told, self.next_at = True, 0.0

    def tell(self):
        """Something may be waiting (a notification, a reconnect): render on the next turn."""
        self.told = True

    def due(self, now):
        """True when told or when the idle interval has passed."""
        return self.told or now >= self.next_at

    def turn(self):
        """Render for up to RENDER_SECONDS; returns how many events."""
        done, until = 0, time.monotonic() + RENDER_SECONDS
        while time.monotonic() < until:
            with db.transaction(self.link.conn):
                count = render_pending(self.link.conn, self.clock(), RENDER_BATCH)
            done += count
            if count < RENDER_BATCH:
                self.told, self.next_at = False, time.monotonic() + RENDER_IDLE_SECONDS
                break
        return done


class ClaimingAndSending(Service):
    """Leases due work for its free workers and sends it on the thread pool; outcomes go to `results`.

    Its leases name the process's key (`holder`), whose session advisory lock it holds on the link's
    connection, taken again after a reconnect: another process frees them at once if it dies.
    """

    name = "claiming and sending"

    def __init__(self, settings, link, sender, clock, wakeup):
        super().__init__()
        self.settings, self.link, self.sender, self.clock, self.wakeup = settings, link, sender, clock, wakeup
        self.executor = None
        self.in_flight = Counter()  # requests sent and not recorded yet, per endpoint
        self.results = queue.SimpleQueue()
        self.holder, self.held_on = None, None  # the process's key; the connection holding its lock
        self.orphans_at = 0.0  # when to free orphaned leases next (monotonic)
        self.unopened = set()  # endpoints whose secret would not open, said once each

    def start(self):
        """Start the thread pool."""
        self.executor = ThreadPoolExecutor(self.settings.workers, thread_name_prefix="webhook")
        super().start()

    def close(self):
        """Wait for the requests in flight (their outcomes stay in `results`) and release the pool."""
        self.executor.shutdown(wait=True)
        super().close()

    def turn(self):
        """Lease as much due work as there are free workers and start sending it; returns how many."""
        claimed = self._claim()
        for delivery in claimed:
            self.in_flight[delivery.endpoint_id] += 1
            try:
                opened = self.settings.secret_keys.opened(delivery)
            except SecretKeyError as error:
                self._not_sent(delivery, error)
                continue
            self.executor.submit(self._send, opened)
        return len(claimed)

    def _claim(self):
        """One round trip, its own transaction; the per-endpoint cap is counted over every process's leases.

        Once a second, first, the leases of processes that are gone are made due (one more round trip).
        """
        total_free = self.settings.workers - sum(self.in_flight.values())
        if not self.running:
            return []
        self.hold()
        now = self.clock()
        if time.monotonic() >= self.orphans_at:
            self.orphans_at = time.monotonic() + ORPHANS_SECONDS
            webhook_deliveries.free_orphaned(self.link.conn, now, self.holder)
        if total_free <= 0:
            return []
        return webhook_deliveries.claim_due(self.link.conn, now, now + self.settings.lease, str(uuid.uuid4()),
                                            self.settings.per_endpoint, total_free, self.holder)

    def hold(self):
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
            log.error("the secret of this endpoint will not open with this process's secret key; its deliveries "
                      "fail and are retried until a key that opens it is set endpoint_id=%s error=%r",
                      format_id(PREFIXES["webhook_endpoint"], delivery.endpoint_id), str(error))
        now = self.clock()
        self.results.put((delivery, Result(delivery, now, now, Outcome(False, None, NOT_SENT, None, None, 0))))

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

    def finished(self):
        """The (delivery, result) pairs finished since the last call."""
        done = []
        while True:
            try:
                done.append(self.results.get_nowait())
            except queue.Empty:
                return done

    def settle(self, done):
        """Free the workers of recorded requests."""
        for delivery, _result in done:
            self.in_flight[delivery.endpoint_id] -= 1
            if self.in_flight[delivery.endpoint_id] <= 0:
                del self.in_flight[delivery.endpoint_id]


class Recording(Service):
    """Records the finished requests of `sending` in one transaction per turn.

    Outcomes leave memory only once their transaction committed: when the connection is lost they
    stay in `unrecorded` and are recorded after reconnecting (recording twice is harmless). The
    recording commits only when this process says so (a pass killed before that records nothing,
    and its requests are sent again when the leases run out).
    """

    name = "recording"

    def __init__(self, link, sending):
        super().__init__()
        self.link, self.sending = link, sending
        self.unrecorded = []  # finished requests whose recording has not committed yet

    @property
    def holding(self):
        """True while requests are in flight or outcomes wait to be recorded."""
        return bool(self.sending.in_flight or self.unrecorded)

    def kept(self):
        """How many outcomes are in memory, finished or on their way."""
        return len(self.unrecorded) + self.sending.results.qsize()

    def turn(self):
        """Record what finished; returns how many."""
        self.unrecorded.extend(self.sending.finished())
        done = self.unrecorded
        if done:
            with db.transaction(self.link.conn):
                recording.record(self.link.conn, [result for _delivery, result in done if result is not None])
        self.unrecorded = []
        self.sending.settle(done)
        return len(done)

