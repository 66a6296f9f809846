"""HTTPS POST of one signed webhook to the checked address, with the spec's deadlines, on `requests`.

The TCP connection goes to the address the SSRF guard checked; TLS is verified
against the URL's host name (SNI and certificate), so no second DNS lookup can
redirect the request.  requests/urllib3 keep connections alive per (address, host).

How that is done with requests (2.32+, urllib3 2.x):

- the request goes to `https://<checked address>:<port><path>` with a `Host`
  header of the real host; `_PinnedAdapter.build_connection_pool_key_attributes`
  adds `server_hostname` and `assert_hostname` (the real host) to the pool key,
  so urllib3 sends SNI for, and checks the certificate against, the host name;
- requests' timeouts bound each socket operation, not the attempt, so
  `_DeadlineConnection` (the pools' connection class) hands its socket to the
  WATCHDOG at the attempt's deadline, which travels in a threading.local;
- the DNS lookup of the SSRF guard runs on a small thread pool, so that it too ends at the
  deadline (getaddrinfo cannot be interrupted: a stuck lookup keeps its thread, not the worker).

The whole exchange is inside the 15 s: lookup, connect, TLS, request, status line, headers and the
reply's first 2 KB (or all of it, when shorter).  A reply not complete at the deadline is a failure,
whatever status line came first.
"""
import concurrent.futures
import http.client
import http.cookiejar
import socket
import ssl
import threading
import time
from dataclasses import dataclass

import certifi
import requests
import urllib3
from requests.adapters import HTTPAdapter
from urllib3.util import SKIP_HEADER

from delivery import signing, ssrf
from delivery.watchdog import WATCHDOG

ANSWER_SECONDS = 10.0   # a 2xx status must arrive within this
TOTAL_SECONDS = 15.0    # the sender stops waiting after this, in all
KEEP_BYTES = 2048       # only the first 2 KB of a reply is read and kept
IDLE_SECONDS = 20.0     # an idle kept-alive connection older than this is not reused
POOL_HOSTS = 1024       # (address, host) pools kept; the least recently used beyond this is closed
# Socket timeouts are only a backstop behind the watchdog once the socket is watched,
# so that the deadline is reported as such, not as a socket timeout that raced it.
BACKSTOP_SECONDS = 1.0

# Errors of a kept-alive connection the receiver had closed: the request is tried again on a fresh one.
_STALE = (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError)

_local = threading.local()


@dataclass
class Outcome:
    """What one attempt gave, as recorded in webhook_attempts."""

    succeeded: bool
    status_code: int | None
    error: str | None
    response_body: str | None
    address: str | None
    duration_ms: int


class _Attempt:
    """One try of one request in this thread: its target, deadline and watched sockets."""

    def __init__(self, target, deadline):
        self.target, self.deadline = target, deadline
        self.watches = []
        self.fired = False
        self.reused = False

    def watch(self, sock):
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


def _current():
    return getattr(_local, "attempt", None)


class _DeadlineConnection(urllib3.connection.HTTPSConnection):
    """A urllib3 HTTPS connection whose socket the watchdog cuts at the attempt's deadline."""

    exchanges = 0   # requests sent since this connection was (re)connected

    def _new_conn(self):
        sock = super()._new_conn()
        attempt = _current()
        if attempt is not None:
            # The TLS handshake is bounded as a whole by the socket timeout (CPython's
            # do_handshake keeps one deadline), so it also ends at the attempt's deadline.
            sock.settimeout(max(0.001, attempt.deadline - time.monotonic()))
        return sock

    def connect(self):
        self.exchanges = 0
        super().connect()
        attempt = _current()
        if attempt is not None:
            attempt.watch(self.sock)

    def request(self, *args, **kwargs):
        attempt = _current()
        if attempt is not None:
            attempt.reused = self.exchanges > 0
            attempt.watch(self.sock)
        self.exchanges += 1
        return super().request(*args, **kwargs)


class _DeadlinePool(urllib3.HTTPSConnectionPool):
    """urllib3's HTTPS pool with `_DeadlineConnection`s, not reusing connections idle for IDLE_SECONDS."""

    ConnectionCls = _DeadlineConnection

    def _get_conn(self, timeout=None):
        conn = super()._get_conn(timeout)
        idle_since = getattr(conn, "idle_since", None)
        if idle_since is not None and time.monotonic() - idle_since >= IDLE_SECONDS:
            conn.close()  # reconnected before use
        return conn

    def _put_conn(self, conn):
        attempt = _current()
        if conn is not None:
            # Unwatch before the connection can go to another thread; one the deadline cut is not kept.
            if attempt is not None and attempt.release(conn.sock):
                conn.close()
            conn.idle_since = time.monotonic()
        super()._put_conn(conn)


class _PinnedAdapter(HTTPAdapter):
    """Sends to the checked address only, with SNI and certificate checks against the real host name."""

    def init_poolmanager(self, *args, **kwargs):
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {**self.poolmanager.pool_classes_by_scheme,
                                                   "https": _DeadlinePool}

    def build_connection_pool_key_attributes(self, request, verify, cert=None):
        host_params, pool_kwargs = super().build_connection_pool_key_attributes(request, verify, cert)
        attempt = _current()
        if (attempt is None or host_params["scheme"] != "https"
                or host_params["host"] != attempt.target.address):
            raise requests.exceptions.InvalidURL(f"{request.url} is not the checked address of this attempt")
        pool_kwargs["server_hostname"] = attempt.target.host
        pool_kwargs["assert_hostname"] = attempt.target.host
        return host_params, pool_kwargs


class _Session(requests.Session):
    """A requests Session with nothing of its own: no default headers, cookies, environment or redirects."""

    def __init__(self, verify, pool_size):
        super().__init__()
        self.headers.clear()
        self.trust_env = False  # no proxies, netrc credentials or CA bundle from the environment
        self.verify = verify
        self.cookies.set_policy(http.cookiejar.DefaultCookiePolicy(allowed_domains=[]))
        self.adapters.clear()
        self.mount("https://", _PinnedAdapter(pool_connections=POOL_HOSTS, pool_maxsize=pool_size))

    def get_redirect_target(self, resp):
        # Even with allow_redirects=False, requests reads a redirect's whole body to
        # prepare `response.next`; never following means never looking for a target.
        return None


class Sender:
    """Sends webhook requests; thread-safe, one per process."""

    def __init__(self, *, ca_bundle, allowed_networks, service_domain, workers,
                 answer_seconds=ANSWER_SECONDS, total_seconds=TOTAL_SECONDS, resolver=None):
        verify = ca_bundle or certifi.where()
        ssl.create_default_context(cafile=verify)  # a bad CA bundle setting fails here, not on every attempt
        # Idle connections kept per (address, host): never more are in flight than there are workers.
        self.session = _Session(verify, workers)
        self.adapter = self.session.get_adapter("https://")
        self.allowed = ssrf.allowed_networks(allowed_networks)
        self.service_domain = service_domain
        self.answer_seconds, self.total_seconds = answer_seconds, total_seconds
        self.resolver = resolver
        self._lookups = concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="webhook-dns")

    def check(self, url):
        """The checked Target for `url`, or ssrf.RefusedUrl."""
        return ssrf.check_url(url, self.service_domain, self.allowed, self.resolver)

    def send(self, url, secret, message_id, body, timestamp):
        """POST `body` signed for this attempt's `timestamp`; never raises for the receiver's faults."""
        started = time.monotonic()
        try:
            if self.resolver is None and ssrf.names_an_address(url):
                target = self.check(url)
            else:
                lookup = self._lookups.submit(self.check, url)
                target = lookup.result(timeout=self.total_seconds)
        except concurrent.futures.TimeoutError:
            lookup.cancel()
            return Outcome(False, None, f"timed out after {self.total_seconds:g} s resolving the host name",
                           None, None, _ms(started))
        except ssrf.RefusedUrl as refusal:
            return Outcome(False, None, f"refused: {refusal}", None, None, _ms(started))
        host = _bracket(target.host)
        headers = {"Host": host if target.port == 443 else f"{host}:{target.port}",
                   **signing.headers(secret, message_id, timestamp, body),
                   "Accept-Encoding": SKIP_HEADER}  # http.client would add "Accept-Encoding: identity"
        # requests adds Content-Length for the bytes body.
        outcome = self._exchange(target, headers, body, started, may_retry=True)
        if outcome is None:  # a kept-alive connection the receiver had closed: once more on a fresh one
            outcome = self._exchange(target, headers, body, started, may_retry=False)
        return outcome

    def _exchange(self, target, headers, body, started, may_retry):
        deadline = started + self.total_seconds
        attempt = _local.attempt = _Attempt(target, deadline)
        try:
            remaining = max(0.001, deadline - time.monotonic())
            try:
                response = self.session.post(
                    f"https://{_bracket(target.address)}:{target.port}{target.path}",
                    data=body, headers=headers, allow_redirects=False, stream=True,
                    timeout=(remaining, remaining + BACKSTOP_SECONDS))
                answered = time.monotonic() - started
            except (requests.RequestException, urllib3.exceptions.HTTPError, OSError,
                    http.client.HTTPException) as error:
                fired = attempt.finish()
                root = _root(error)
                if may_retry and attempt.reused and not fired and isinstance(root, _STALE):
                    return None
                return self._failure(error, root, fired, target, started)
            try:
                kept, complete, cut = _read_start(response.raw)
            finally:
                # A reply read to its end has already gone back to the pool; any other closes its connection.
                response.close()
                fired = attempt.finish()
            if fired and complete is not True:
                return Outcome(False, response.status_code,
                               f"timed out after {self.total_seconds:g} s while reading the reply "
                               f"(HTTP {response.status_code}, {len(kept)} bytes of it had come)",
                               _text(kept), target.address, _ms(started))
            if cut is not None or complete is False:
                return Outcome(False, response.status_code,
                               f"reply cut short after {len(kept)} bytes (HTTP {response.status_code})"
                               + (f": {type(cut).__name__}: {cut}" if cut is not None else ""),
                               _text(kept), target.address, _ms(started))
            return self._judge(response, answered, kept, target, started)
        finally:
            _local.attempt = None

    def _judge(self, response, answered, kept, target, started):
        status = response.status_code
        text = _text(kept)
        error = None
        if 300 <= status < 400:
            where = response.headers.get("Location")
            error = f"redirect ({status}) to {where!r} not followed" if where else f"redirect ({status}) not followed"
        elif not 200 <= status < 300:
            error = f"HTTP {status}"
        elif answered > self.answer_seconds:
            error = f"answered after {answered:.1f} s; a reply must come within {self.answer_seconds:g} s"
        return Outcome(error is None, status, error, text, target.address, _ms(started))

    def _failure(self, error, root, fired, target, started):
        if fired:
            message = f"no reply within {self.total_seconds:g} s; abandoned"
        elif isinstance(error, requests.Timeout) or isinstance(root, (socket.timeout, TimeoutError)):
            message = f"timed out after {time.monotonic() - started:.1f} s"
        elif isinstance(error, requests.exceptions.SSLError) or isinstance(root, (ssl.SSLError, ssl.CertificateError)):
            message = f"TLS error: {root}"
        elif isinstance(root, ConnectionRefusedError):
            message = "connection refused"
        else:
            message = f"{type(root).__name__}: {root}" if str(root) else type(root).__name__
        return Outcome(False, None, message, None, target.address, _ms(started))

    def close(self):
        """Close every kept-alive connection."""
        self.session.close()
        self._lookups.shutdown(wait=False, cancel_futures=True)


def _read_start(raw):
    """(the first KEEP_BYTES of the reply as they came, complete, error that cut it).

    complete is True when those bytes, or the whole reply of a declared length, arrived; None for
    a reply without a length that ended (its end and a socket the deadline shut look the same);
    False when it ended early.
    """
    kept = b""
    try:
        while len(kept) < KEEP_BYTES:
            chunk = raw.read1(KEEP_BYTES - len(kept), decode_content=False)
            if not chunk:
                # An end of stream before the declared length raises; a shut socket may also end like this.
                return kept, _ended(raw), None
            kept += chunk
    except (OSError, http.client.HTTPException, urllib3.exceptions.HTTPError) as error:
        return kept, False, _root(error)
    return kept, True, None


def _ended(raw):
    """True when the reply was read to its declared length, None when it declared none, else False."""
    remaining = getattr(raw, "length_remaining", None)
    return None if remaining is None else remaining == 0


def _text(kept):
    return kept.decode("utf-8", "replace").replace("\x00", "\ufffd")


def _root(error):
    """The underlying error of a requests/urllib3 wrapper (ConnectionRefusedError, ssl.SSLError, ...)."""
    seen = set()
    while id(error) not in seen:
        seen.add(id(error))
        inner = getattr(error, "reason", None)
        if not isinstance(inner, BaseException):
            inner = next((arg for arg in error.args if isinstance(arg, BaseException)), None)
        if inner is None:
            inner = error.__cause__
        if inner is None:
            break
        error = inner
    return error


def _bracket(host):
    return f"[{host}]" if ":" in host else host


def _ms(started):
    return int((time.monotonic() - started) * 1000)
