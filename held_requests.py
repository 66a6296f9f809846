"""The part of serving.py's worker that holds requests (GET /changes and GET /events with `wait`: api/waiting.py).

A request the application offers to hold (waiting.HOLD in its environ) and that is taken up writes nothing: its
connection is parked in the worker's selector (gthread's `poller`), watched for its client leaving, and the
request, as read, waits beside it; no thread, no place among the requests the application runs at once, no
database connection. Resumed (its feed changed, its wait ended, the worker stops), it is run again whole by one
of the worker's threads (gthread's `enqueue_req`). The worker's main thread parks and resumes; its threads run.
What this takes from gunicorn is named in tests/unit/test_gunicorn_names.py.
"""
import functools
import selectors
import socket

from api import guard, waiting

# What ThreadWorker.handle returns (serving.py) for a connection whose request is held: parked by finish_request.
PARKED = object()


class Held(Exception):
    """The application offered to hold its request and was taken up: nothing is written now."""


class HoldingWorker:
    """Held requests for a gthread worker whose connections are serving.ClientSockets."""

    def finish_request(self, conn, fs):
        """ThreadWorker.finish_request (in the main loop), parking a connection whose request is held."""
        if not fs.cancelled() and fs.exception() is None and fs.result() is PARKED:
            self.park(conn)
            return
        super().finish_request(conn, fs)

    def offer_holding(self, sock, environ):
        """Before the application runs: its offer to hold the request, and a held one's first run's count."""
        if sock.held is not None:  # run again after its hold: counted on its first run
            environ[waiting.HELD] = sock.held
            environ[guard.COUNTED_BY] = sock.held.authentication
        environ[waiting.HOLD] = functools.partial(self.offer_hold, sock)

    @staticmethod
    def drop_if_held(sock, body):
        """After the application returned: its answer is dropped unsent if it holds the request (raises Held)."""
        if sock.holding:
            if hasattr(body, "close"):
                body.close()
            raise Held()

    @staticmethod
    def now_held(sock):
        """After a run, in its thread: whether it held its request (then parked); else the hold is forgotten."""
        if sock.holding:
            sock.holding = False
            return True
        sock.held = sock.request = sock.conn = None
        return False

    def offer_hold(self, sock, hold, heard_before):
        """The application's offer to hold its request (waiting.HOLD): taken unless stopping or full."""
        if not self.alive:
            return False
        hold.resume = functools.partial(self.method_queue.defer, self.resume, sock, hold)
        if not waiting.WAITERS.add(hold, heard_before):
            return False
        sock.held, sock.holding = hold, True
        return True

    def park(self, conn):
        """Keep a held request's connection in the selector, watched for its client leaving, until resumed."""
        hold = conn.sock.held
        conn.sock.conn = conn
        if hold.woken or not self.alive:
            self.enqueue_req(conn)  # resumed while its thread was ending, or the worker stops
            return
        hold.parked = True
        conn.sock.setblocking(False)
        self.poller.register(conn.sock, selectors.EVENT_READ, functools.partial(self.on_held_readable, conn))

    def resume(self, sock, hold):
        """Run a held request again (its feed changed, its wait ended, or the worker stops)."""
        if hold.gone:
            return
        if not hold.parked:  # its thread has not returned yet: park() runs it again at once
            hold.woken = True
            return
        hold.parked = False
        try:
            self.poller.unregister(sock)
        except (KeyError, ValueError):  # no longer watched (on_held_readable)
            pass
        self.enqueue_req(sock.conn)

    def on_held_readable(self, conn):
        """A held request's client closed its connection: it is forgotten and closed (or it sent more: kept)."""
        try:
            data = conn.sock.recv(1, socket.MSG_PEEK)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        self.poller.unregister(conn.sock)
        if data:  # bytes after the request (keepalive is off): nobody reads them, the answer closes the connection
            return
        hold = conn.sock.held
        waiting.WAITERS.remove(hold)
        hold.gone = True
        conn.sock.held = conn.sock.request = conn.sock.conn = None
        self.nr_conns -= 1
        conn.close()

    def answer_held(self, conn):
        """Run a held request again, whole, in this thread: what ThreadWorker.handle does after reading one."""
        req = conn.sock.request
        conn.sock.setblocking(True)
        try:
            return self.handle_request(req, conn)
        except OSError as error:
            self.log.debug("Ignoring a held request's closed connection: %s", error)
        except Exception as error:  # noqa: BLE001 (what ThreadWorker.handle answers too)
            self.handle_error(req, conn.sock, conn.client, error)
        return False

    def handle_exit(self, sig, frame):
        """ThreadWorker.handle_exit, answering every held request first: a stopping worker cuts none."""
        super().handle_exit(sig, frame)
        self.method_queue.defer(waiting.WAITERS.wake_all)
