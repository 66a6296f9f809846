"""The delivery process: its services run as one bounded cron pass (`run_pass`) or continuously (`watch`).

The services (delivery/services.py: rendering, claiming and sending, recording; delivery/housekeeping.py:
housekeeping, e-mail) share the process's one database connection (delivery/link.py). A lost
connection never ends the process: the link reconnects with backoff, and the outcomes of requests that
finished meanwhile stay in memory until they are recorded, so a blip sends nothing twice.
"""
import enum
import logging
import time

from delivery.attempts import utcnow
from delivery.housekeeping import Email, Housekeeping
from delivery.link import RECONNECTED, AsLongAsLeases, DatabaseUnavailable, Link, LinkState, Until, WhileRunning
from delivery.listener import Listener
from delivery.services import ClaimingAndSending, Recording, Rendering
from delivery.wakeup import Wakeup

log = logging.getLogger("delivery")

__all__ = ["DatabaseUnavailable", "Dispatcher", "ProcessState"]


class ProcessState(enum.Enum):
    """RUNNING until SIGTERM / SIGINT; then STOPPING: claim nothing new, record what is in flight, exit."""

    RUNNING = "running"
    STOPPING = "stopping"


class Dispatcher:
    """Starts the delivery services on one connection and runs them as a pass or a watch."""

    def __init__(self, settings, sender=None, clock=utcnow):
        self.settings, self.clock = settings, clock
        self.sender = sender or settings.make_sender()
        self.link = Link(settings.target, settings.lease.total_seconds(), kept=self._kept,
                         on_reconnect=self._reconnected)
        self.wakeup = Wakeup()
        self.state = ProcessState.RUNNING
        self.rendering = Rendering(self.link, clock)
        self.sending = ClaimingAndSending(settings, self.link, self.sender, clock, self.wakeup)
        self.recording = Recording(self.link, self.sending)
        self.housekeeping = Housekeeping(self.link, settings, clock)
        self.email = Email(self.link, settings, clock)
        self.services = (self.rendering, self.sending, self.recording, self.housekeeping, self.email)
        for service in self.services:
            service.start()

    # What the services hold, by the names the fault tests read.
    conn = property(lambda self: self.link.conn, lambda self, conn: setattr(self.link, "conn", conn))
    in_flight = property(lambda self: self.sending.in_flight)
    results = property(lambda self: self.sending.results)
    executor = property(lambda self: self.sending.executor)
    unrecorded = property(lambda self: self.recording.unrecorded)
    reconnects = property(lambda self: self.link.reconnects)

    def _kept(self):
        return sum(self.sending.in_flight.values()), self.recording.kept()

    def _reconnected(self):
        self.rendering.tell()  # notifications sent meanwhile are lost; look for work at once

    def stop(self):
        """Ask the process to finish what is in flight and return (safe from a signal handler)."""
        self.state = ProcessState.STOPPING
        for service in (self.sending, self.housekeeping, self.email):
            service.stop()
        self.wakeup.wake()

    def close(self):
        """Wait for requests in flight, record them, stop every service and release everything."""
        # Outcomes are kept for as long as the leases last: after that another pass sends the work again.
        patience = Until(time.monotonic() + self.settings.lease.total_seconds())
        try:
            while self.sending.in_flight and self.link.state is not LinkState.UNAVAILABLE:
                self.wait(1.0)
                self.link.run(self.recording.turn, patience)
        except DatabaseUnavailable:
            pass
        if self.sending.in_flight:
            log.error("database unreachable; %s outcomes not recorded (their deliveries are retried when "
                      "the leases run out)", self.recording.kept())
        for service in self.services:
            service.stop()
            service.close()
        self.link.close()
        self.sender.close()
        self.wakeup.close()

    def guarded(self, turn):
        """`turn()`, a lost connection waited out as long as the leases last; None when it was cut and reconnected."""
        answer = self.link.run(turn, AsLongAsLeases())
        return None if answer is RECONNECTED else answer

    def render(self):
        """One turn of rendering; returns how many events."""
        return self.rendering.turn()

    def record_and_claim(self, claiming=True):
        """Record finished requests, then (when `claiming`) lease new work and start sending it.

        The claim is its own transaction, after the recording, so its count of each endpoint's
        leases already leaves out the requests just recorded.
        """
        return self.recording.turn() + (self.sending.turn() if claiming else 0)

    def step(self):
        """One turn of the delivery services; returns how much work they did."""
        done = self.rendering.turn() if self.rendering.due(time.monotonic()) else 0
        return done + self.record_and_claim()

    def wait(self, timeout, also=()):
        """Sleep until a request finishes, one of `also` is readable, or `timeout` passes."""
        # A request that finished before the loop fell asleep wrote nothing: its outcome is already queued.
        self.wakeup.sleep(timeout, also, ready=lambda: not self.sending.results.empty())

    def run_pass(self, seconds=None):
        """One bounded cron pass: deliver what is due, claim nothing new after `seconds`, then drain."""
        deadline = time.monotonic() + (self.settings.pass_seconds if seconds is None else seconds)
        self.link.run(self.housekeeping.turn, Until(deadline))
        self.link.run(self.email.turn, Until(deadline))
        while True:
            if time.monotonic() >= deadline:
                self.sending.stop()  # draining: what is in flight is recorded, nothing new is claimed
            # While nothing is held there is nothing to keep: give up on the database at the deadline.
            holding = self.recording.holding
            patience = AsLongAsLeases() if holding else Until(max(deadline, time.monotonic() + 1))
            done = self.link.run(self.step, patience)
            if done is RECONNECTED:
                continue  # record what was kept, look for work again
            if not self.recording.holding and (not done or not self.sending.running):
                break
            if not done:
                self.wait(0.5)
        self.link.run(self.email.turn, Until(time.monotonic() + 1))

    def watch(self, idle_seconds=5.0, housekeeping_seconds=60.0):
        """Deliver continuously, woken by NOTIFY from the outbox triggers, until stopped.

        Survives a lost database: both connections are made again (with backoff) and nothing
        finished meanwhile is forgotten.
        """
        self.housekeeping.every = self.email.every = housekeeping_seconds
        patience = WhileRunning(lambda: self.state is ProcessState.STOPPING)
        listener = Listener(self.settings.listen_target)
        if listener.connect():
            self.rendering.tell()  # anything committed while not listening
        try:
            while self.state is ProcessState.RUNNING:
                for service in (self.housekeeping, self.email):
                    if service.due(time.monotonic()):
                        self.link.run(service.turn, patience)
                # Every turn, not only when idle: while outcomes keep coming (a busy or failing endpoint),
                # the loop never idles, and new events would wait for the periodic render.
                if listener.heard():
                    self.rendering.tell()
                done = self.link.run(self.step, patience)
                if done is RECONNECTED or done:
                    continue
                timeout = self.link.run(lambda: self.sending.next_claim_in(idle_seconds), patience)
                if timeout is RECONNECTED:
                    continue
                if listener.conn is None:
                    if listener.connect():
                        self.rendering.tell()
                        timeout = 0.0
                    else:
                        timeout = min(1.0, timeout or 1.0)
                self.wait(timeout, also=listener.sockets())
        finally:
            listener.close()
