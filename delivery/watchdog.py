"""One thread that cuts sockets at their deadline, so no request outlives the 15 s limit.

Socket timeouts bound each read, not the whole exchange: a receiver dripping a
byte every few seconds would otherwise hold a worker for ever.
"""
import heapq
import itertools
import socket
import threading
import time


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
