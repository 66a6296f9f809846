"""What ends a webhook request at its deadline: the watchdog thread that cuts sockets, and the Attempt that
carries a try's target and deadline through requests and urllib3 to the connection that opens its socket
(delivery/transport.py), in a threading.local (`attempting()`).

Socket timeouts bound each read, not the whole exchange: a receiver dripping a byte every few seconds
would otherwise hold a worker for ever.
"""
import heapq
import itertools
import socket
import threading
import time
from contextlib import contextmanager

_local = threading.local()


class Watch:
    """A registered socket; `fired` tells the sender its deadline cut the exchange."""

    __slots__ = ("deadline", "sock", "active", "fired")

    def __init__(self, deadline, sock):
        self.deadline, self.sock, self.active, self.fired = deadline, sock, True, False


class Watchdog:
    """Shuts sockets down at their monotonic deadline."""

    def __init__(self):
        self._condition = threading.Condition()
        self._heap = []
        self._counter = itertools.count()
        self._thread = None

    def watch(self, sock, deadline):
        """Cut `sock` at `deadline` (time.monotonic()) unless cancelled first."""
        entry = Watch(deadline, sock)
        with self._condition:
            heapq.heappush(self._heap, (deadline, next(self._counter), entry))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="webhook-watchdog", daemon=True)
                self._thread.start()
            if self._heap[0][2] is entry:
                # Only an earlier deadline than the thread sleeps towards needs it awake (a pass's
                # deadlines come in order, so that is rare): waking it per request cost the senders the lock.
                self._condition.notify()
        return entry

    def cancel(self, entry):
        """Stop watching; returns True when the deadline had already cut the socket."""
        with self._condition:
            entry.active = False
            return entry.fired

    def _run(self):
        while True:
            with self._condition:
                while self._heap and not self._heap[0][2].active:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._condition.wait()
                    continue
                wait = self._heap[0][0] - time.monotonic()
                if wait > 0:
                    self._condition.wait(wait)
                    continue
                entry = heapq.heappop(self._heap)[2]
                entry.fired = True
                entry.active = False
            try:
                entry.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already closed by its owner


WATCHDOG = Watchdog()


class Attempt:
    """One try of one request in this thread: its target, deadline and watched sockets."""

    def __init__(self, target, deadline):
        self.target, self.deadline = target, deadline
        self.watches = []
        self.fired = False
        self.reused = False
        self.written = None   # time.monotonic() when the request had been written to the socket
        self.answered = None  # time.monotonic() when the reply's first byte was read

    def waited(self):
        """Seconds from the request written to the reply's first byte read: the receiver's time."""
        return self.answered - self.written

    def watch(self, sock):
        """Have the watchdog shut `sock` at this attempt's deadline (once per socket)."""
        if sock is not None and not any(w.sock is sock and w.active for w in self.watches):
            self.watches.append(WATCHDOG.watch(sock, self.deadline))

    def release(self, sock):
        """Stop watching `sock` (its connection goes back to the pool); True when the deadline had cut it."""
        cut = False
        for entry in self.watches:
            if entry.sock is sock and entry.active:
                cut = WATCHDOG.cancel(entry) or cut
        self.fired = self.fired or cut
        return cut

    def finish(self):
        """Stop watching everything; True when the deadline cut this attempt."""
        for entry in self.watches:
            self.fired = WATCHDOG.cancel(entry) or self.fired
        self.watches.clear()
        return self.fired


def current():
    """This thread's Attempt, or None outside attempting()."""
    return getattr(_local, "attempt", None)


@contextmanager
def attempting(target, deadline):
    """This thread's Attempt while the block runs: its requests go to `target` only and end at `deadline`."""
    attempt = _local.attempt = Attempt(target, deadline)
    try:
        yield attempt
    finally:
        _local.attempt = None
