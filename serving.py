"""The gunicorn worker: threads that read each request whole, within a deadline, before the application sees it,
and write each response within a deadline of its own, after the request has left its place in the application.

Requests gunicorn refuses itself are answered with the API's JSON error body (worker_answers.py).
What this takes from gunicorn beyond its settings and hooks (gthread's methods, nr_conns, a request's
_expected_100_continue, ...) is named in tests/unit/test_gunicorn_names.py, which an upgrade that moves one fails.
"""
import io
import socket
import struct
import threading
import time
from datetime import datetime

from gunicorn import util
from gunicorn.http import errors as http_errors
from gunicorn.http.body import LengthReader
from gunicorn.http.wsgi import Response, default_environ
from gunicorn.workers.gthread import ThreadWorker

from api import metrics, waiting
from api.errors import InternalError
from config import load_config
from held_requests import PARKED, Held, HoldingWorker
from logs import ENVIRON_REQUEST_ID, ENVIRON_ROUTE
from worker_answers import REQUEST_SECONDS, RequestTimeout, client_error, error_bytes, status_line


class ResponseTimeout(TimeoutError):
    """A response not read by its deadline: RESPONSE_SECONDS plus its length at RESPONSE_BYTES_PER_SECOND.

    A TimeoutError, so gunicorn passes it on as a socket's error instead of answering it.
    """


class ClientSocket(socket.socket):
    """A client's connection whose reads and writes fail once their deadline (time.monotonic()) has passed.

    Each write moves the write deadline on by its bytes' share (`seconds_per_byte`): a response is
    given a base time plus its length at a minimum rate, however the application cuts it in pieces.
    """

    deadline = None
    write_deadline = None
    seconds_per_byte = 0.0
    # The WSGI environ of the response being written (its request id and route, for the log of a cut).
    environ = None
    # A held request (held_requests.py): its Hold, the request as read, its TConn, whether this run holds it.
    held = request = conn = None
    holding = False

    def recv(self, size, flags=0):
        """socket.recv, given only the time left before the deadline, if one is set."""
        return self._within(self.deadline, RequestTimeout, super().recv, size, flags)

    def sendall(self, data, flags=0):
        """socket.sendall, given only the time left before the write deadline (moved on by `data`), if one is set."""
        if self.write_deadline is not None:
            self.write_deadline += len(data) * self.seconds_per_byte
        return self._within(self.write_deadline, ResponseTimeout, super().sendall, data, flags)

    def _within(self, deadline, timeout, call, *args):
        # A timeout per call would be met by a client taking a byte a second: each call gets the time left.
        if deadline is None:
            return call(*args)
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise timeout()
        self.settimeout(remaining)
        try:
            return call(*args)
        except TimeoutError:
            raise timeout() from None
        finally:
            self.settimeout(None)

    def abort(self):
        """Close at once, with a reset: what the client has not read is dropped, not sent on after the close."""
        self.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close()


class ReceivedBody(io.BytesIO):
    """A request body read before the application ran: its bytes, then the framing error that cut it, if any."""

    def __init__(self, data, error=None):
        super().__init__(data)
        self.error = error

    def read(self, size=-1):
        """BytesIO.read; past the last byte, the error reading the body met (the application answers it)."""
        data = super().read(size)
        if not data and size != 0 and self.error is not None:
            raise self.error
        return data


# What ThreadWorker.handle returns for a connection this worker closed already (see finish_request).
_CLOSED = object()


class JsonErrorWorker(HoldingWorker, ThreadWorker):
    """gunicorn's gthread worker, reading requests whole within REQUEST_SECONDS; its own answers are JSON.

    A slow client holds one of the worker's threads for REQUEST_SECONDS at most, never the process, a
    database connection or a place among the requests the application runs at once. A slow reader
    holds a thread until its response's write deadline, and nothing else: the application has returned
    (and its connection with it) before the first byte is written.
    """

    def init_process(self):
        """Read the settings the worker keeps to (the body limit, the pool size, the write deadline), then run."""
        settings = load_config()
        self.body_limit = settings["MAX_CONTENT_LENGTH"]
        # A request in the application holds at most one pooled connection: no more run at once than the pool
        # holds, so the others wait here for one rather than fail for want of a connection (models/pool.py).
        self.in_application = threading.BoundedSemaphore(int(settings["DATABASE_POOL_SIZE"]))
        self.response_seconds = float(settings["RESPONSE_SECONDS"])
        self.seconds_per_byte = 1 / float(settings["RESPONSE_BYTES_PER_SECOND"])
        self.recording = bool(settings["METRICS_ENABLED"])
        waiting.WAITERS.limit = int(settings["WAITERS_PER_PROCESS"])
        super().init_process()

    def load_wsgi(self):
        """gunicorn's application, run in one of the `in_application` places, which it leaves when it returns.

        Flask returns the connection to the pool (a teardown) before it returns the response's body, which
        gunicorn writes afterwards: a file as a wrapper it reads while writing, anything else already in memory.
        """
        super().load_wsgi()
        application = self.wsgi

        def in_place(environ, start_response):
            sock = environ["gunicorn.socket"]
            if isinstance(sock, ClientSocket):
                self.offer_holding(sock, environ)
            with self.in_application:
                body = application(environ, start_response)
            if isinstance(sock, ClientSocket):
                sock.environ = environ
                self.drop_if_held(sock, body)
            return body

        self.wsgi = in_place

    def handle(self, conn):
        """ThreadWorker.handle with a deadline on reading the request, closing the connection in this thread."""
        if type(conn.sock) is socket.socket:  # a new connection (TLS wraps it later, without a deadline)
            conn.sock = ClientSocket(fileno=conn.sock.detach())
            conn.sock.setblocking(False)  # as gthread left it: the thread waits for its first byte in a selector
        reading = isinstance(conn.sock, ClientSocket)
        if reading:
            conn.sock.deadline = time.monotonic() + REQUEST_SECONDS
        try:
            keep = self.answer_held(conn) if reading and conn.sock.held is not None else super().handle(conn)
        finally:
            if reading:
                conn.sock.deadline = conn.sock.write_deadline = conn.sock.environ = None
        if reading and self.now_held(conn.sock):
            return PARKED
        if keep is False:
            # Here, not in the worker's main loop, which would wait up to 2 s on a client that does not close.
            if conn.sock.fileno() != -1:  # not aborted already
                util.close_graceful(conn.sock)
            return _CLOSED
        return keep

    def finish_request(self, conn, fs):
        """ThreadWorker.finish_request, for a connection handle() has not closed already (nor held: HoldingWorker)."""
        if not fs.cancelled() and fs.exception() is None and fs.result() is _CLOSED:
            self.nr_conns -= 1
            return
        super().finish_request(conn, fs)

    def handle_request(self, req, conn):
        """Receive the body first (a held request's on its first run), then run the application (load_wsgi) and
        write its answer within a deadline; a request the application holds (Held) writes nothing now."""
        if getattr(conn.sock, "held", None) is None:
            self.receive_body(req, conn.sock)
        if not isinstance(conn.sock, ClientSocket):
            return super().handle_request(req, conn)
        conn.sock.seconds_per_byte = self.seconds_per_byte
        started = time.monotonic()
        conn.sock.write_deadline = started + self.response_seconds
        try:
            return super().handle_request(req, conn)
        except ResponseTimeout:
            self.cut(conn.sock, time.monotonic() - started)
            return False
        except Held:
            conn.sock.request = req
            return False

    def cut(self, sock, seconds):
        """Close the connection of a response not read by its deadline; one WARNING line, one count."""
        environ = sock.environ or {}
        route = environ.get(ENVIRON_ROUTE) or metrics.UNMATCHED_ROUTE
        sock.abort()
        # gunicorn's text lines do not name the request: the message does (JSON lines have the field too).
        self.log.warning("Response of %s cut: the client had not read it within %.1f s (RESPONSE_SECONDS plus "
                         "its length at RESPONSE_BYTES_PER_SECOND); connection closed, request_id=%s", route, seconds,
                         environ.get(ENVIRON_REQUEST_ID), extra={"request_id": environ.get(ENVIRON_REQUEST_ID),
                                                                 "route": route})
        if self.recording:
            metrics.RESPONSES_CUT.labels(route).inc()

    def receive_body(self, req, sock):
        """Read the request's body into memory, up to body_limit + 1 bytes, so no client is waited on later.

        A longer declared length is left unread (the application refuses it on its Content-Length) and
        the connection closes after the answer, as after a body not read to its end.
        """
        if isinstance(req.body.reader, LengthReader) and req.body.reader.length > self.body_limit:
            req.must_close = True
            return
        if req._expected_100_continue:  # the client waits for this before it sends the body
            sock.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
            req._expected_100_continue = False
        try:
            data, error = req.body.read(self.body_limit + 1), None
        except http_errors.ParseException as broken:  # chunked framing: answered where the body is read
            data, error = b"", broken
        if error is not None or len(data) > self.body_limit:
            req.must_close = True
        req.body = ReceivedBody(data, error)

    def handle_error(self, req, client, addr, exc):
        """What Worker.handle_error does (log, access log, answer), with the spec's error body."""
        started = datetime.now()
        addr = addr or ("", -1)  # a unix socket has no peer address
        error = client_error(exc, self.cfg)
        if error is not None:
            self.log.warning("Invalid request from ip=%s: %s", addr[0], exc)
            if req is None and isinstance(exc, (http_errors.InvalidHeader, http_errors.InvalidHeaderName)):
                req = getattr(exc, "req", None)  # a header error may carry the request read so far
        else:
            self.log.exception("Error handling request %s", getattr(req, "uri", "(no URI read)"))
            error = InternalError("Something went wrong on our side. Try again later.")
        data = error_bytes(error)
        if req is not None:
            environ = default_environ(req, client, self.cfg)
            environ["REMOTE_ADDR"], environ["REMOTE_PORT"] = addr[0], str(addr[1])
            response = Response(req, client, self.cfg)
            response.status = status_line(error)
            response.response_length = len(data)
            self.log.access(response, req, environ, datetime.now() - started)
        try:
            util.write_nonblock(client, data)
        except Exception:
            self.log.debug("Failed to send error message.")
