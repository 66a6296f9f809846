"""HTTPS POST of one signed webhook to the checked address, with the spec's deadlines.

The TCP connection goes to the address the SSRF guard checked; TLS is verified
against the URL's host name (SNI and certificate), so no second DNS lookup can
redirect the request.  Connections are kept alive per (address, host) and reused.
"""
import http.client
import socket
import ssl
import threading
import time
from collections import deque
from dataclasses import dataclass

import certifi

from delivery import signing, ssrf
from delivery.watchdog import WATCHDOG

ANSWER_SECONDS = 10.0   # a 2xx status must arrive within this
TOTAL_SECONDS = 15.0    # the sender stops waiting after this, in all
KEEP_BYTES = 2048       # only the first 2 KB of a reply is read and kept
IDLE_SECONDS = 20.0     # an idle kept-alive connection older than this is not reused


@dataclass
class Outcome:
    """What one attempt gave, as recorded in webhook_attempts."""

    succeeded: bool
    status_code: int | None
    error: str | None
    response_body: str | None
    address: str | None
    duration_ms: int


class Sender:
    """Sends webhook requests; thread-safe, one per process."""

    def __init__(self, ca_bundle=None, allowed_networks=(), service_domain=None,
                 answer_seconds=ANSWER_SECONDS, total_seconds=TOTAL_SECONDS, resolver=None):
        self.context = ssl.create_default_context(cafile=ca_bundle or certifi.where())
        self.allowed = ssrf.allowed_networks(allowed_networks)
        self.service_domain = service_domain
        self.answer_seconds, self.total_seconds = answer_seconds, total_seconds
        self.resolver = resolver
        self._idle = {}
        self._lock = threading.Lock()

    def check(self, url):
        """The checked Target for `url`, or ssrf.RefusedUrl."""
        return ssrf.check_url(url, self.service_domain, self.allowed, self.resolver)

    def send(self, url, secret, message_id, body, timestamp):
        """POST `body` signed for this attempt's `timestamp`; never raises for the receiver's faults."""
        started = time.monotonic()
        try:
            target = self.check(url)
        except ssrf.RefusedUrl as refusal:
            return Outcome(False, None, f"refused: {refusal}", None, None, _ms(started))
        headers = signing.headers(secret, message_id, timestamp, body)
        host_header = target.host if target.port == 443 else f"{_bracket(target.host)}:{target.port}"
        headers = {"Host": host_header, **headers, "Content-Length": str(len(body))}
        reused = self._take_idle(target)
        if reused is not None:
            outcome = self._exchange(reused, target, headers, body, started, reused=True)
            if outcome is not None:
                return outcome
        return self._exchange(None, target, headers, body, started, reused=False)

    def _exchange(self, conn, target, headers, body, started, reused):
        deadline = started + self.total_seconds
        watch = None
        try:
            if conn is None:
                conn = self._connect(target, deadline)
            watch = WATCHDOG.watch(conn.sock, deadline)
            conn.sock.settimeout(max(0.001, deadline - time.monotonic()))
            conn.putrequest("POST", target.path, skip_host=True, skip_accept_encoding=True)
            for name, value in headers.items():
                conn.putheader(name, value)
            conn.endheaders(body)
            response = conn.getresponse()
            answered = time.monotonic() - started
        except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as error:
            _close(conn)
            if reused and not (watch and WATCHDOG.cancel(watch)):
                return None  # a kept-alive connection the receiver had closed: retry on a fresh one
            return self._failure(error, watch, target, started)
        except (OSError, http.client.HTTPException) as error:
            _close(conn)
            return self._failure(error, watch, target, started)
        kept, cut = _read_start(response)
        fired = WATCHDOG.cancel(watch)
        if cut or fired or not response.isclosed() or response.will_close:
            _close(conn)  # unread reply (or cut): the connection cannot carry another request
        else:
            self._put_idle(target, conn)
        return self._judge(response, answered, kept, target, started)

    def _judge(self, response, answered, kept, target, started):
        status = response.status
        text = kept.decode("utf-8", "replace").replace("\x00", "\ufffd")
        error = None
        if 300 <= status < 400:
            where = response.getheader("Location")
            error = f"redirect ({status}) to {where!r} not followed" if where else f"redirect ({status}) not followed"
        elif not 200 <= status < 300:
            error = f"HTTP {status}"
        elif answered > self.answer_seconds:
            error = f"answered after {answered:.1f} s; a reply must come within {self.answer_seconds:g} s"
        return Outcome(error is None, status, error, text, target.address, _ms(started))

    def _failure(self, error, watch, target, started):
        if watch is not None and WATCHDOG.cancel(watch):
            message = f"no reply within {self.total_seconds:g} s; abandoned"
        elif isinstance(error, (socket.timeout, TimeoutError)):
            message = f"timed out after {time.monotonic() - started:.1f} s"
        elif isinstance(error, ssl.SSLError):
            message = f"TLS error: {error}"
        elif isinstance(error, ConnectionRefusedError):
            message = "connection refused"
        else:
            message = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
        return Outcome(False, None, message, None, target.address, _ms(started))

    def _connect(self, target, deadline):
        """A TLS connection to the checked address, verified against the host name."""
        raw = socket.create_connection((target.address, target.port),
                                       timeout=max(0.001, deadline - time.monotonic()))
        watch = WATCHDOG.watch(raw, deadline)
        try:
            tls = self.context.wrap_socket(raw, server_hostname=target.host)
        except BaseException:
            WATCHDOG.cancel(watch)
            raw.close()
            raise
        WATCHDOG.cancel(watch)
        conn = http.client.HTTPConnection(target.address, target.port)
        conn.sock = tls
        return conn

    def _take_idle(self, target):
        key = (target.address, target.port, target.host)
        now = time.monotonic()
        with self._lock:
            pool = self._idle.get(key)
            while pool:
                conn, since = pool.pop()
                if now - since < IDLE_SECONDS:
                    return conn
                _close(conn)
        return None

    def _put_idle(self, target, conn):
        key = (target.address, target.port, target.host)
        with self._lock:
            pool = self._idle.setdefault(key, deque())
            pool.append((conn, time.monotonic()))
            while len(pool) > 64:
                _close(pool.popleft()[0])

    def close(self):
        """Close every kept-alive connection."""
        with self._lock:
            for pool in self._idle.values():
                for conn, _since in pool:
                    _close(conn)
            self._idle.clear()


def _read_start(response):
    """The first KEEP_BYTES of the reply, and whether reading was cut short (by the deadline or the peer)."""
    kept = b""
    try:
        while len(kept) < KEEP_BYTES:
            chunk = response.read1(KEEP_BYTES - len(kept))
            if not chunk:
                break
            kept += chunk
        if response.length == 0:
            response.read()  # marks the reply complete, so the connection can be kept alive
    except (OSError, http.client.HTTPException):
        return kept, True  # the status already decided the outcome; a cut body only shortens the log
    return kept, False


def _close(conn):
    if conn is not None:
        conn.close()


def _bracket(host):
    return f"[{host}]" if ":" in host else host


def _ms(started):
    return int((time.monotonic() - started) * 1000)
