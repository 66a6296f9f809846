"""How a webhook request reaches the checked address and no other, and ends at its deadline (requests 2.32+, urllib3 2.x).

- `Client` sends through requests' transport adapter (`HTTPAdapter.send`, its documented interface),
  not through a `Session`: a Session's per-request work (merging session settings, cookies, the
  environment, hooks, redirects) is all switched off here, yet cost (with the `stat`s below) about a
  quarter of the sender's CPU (docs/why-requests.md).
- The CA bundles are loaded once, into the adapter's SSL context. requests' own `cert_verify` would
  `stat` the bundle's path twice per request and hand each new connection the path to load again.
- The request goes to `https://<checked address>:<port><path>` with a `Host` header of the real
  host; `_PinnedAdapter.build_connection_pool_key_attributes` adds `server_hostname` and
  `assert_hostname` (the real host) to the pool key, so urllib3 sends SNI for, and checks the
  certificate against, the host name, and no second DNS lookup can redirect the request.
- requests' timeouts bound each socket operation, not the attempt, so `_DeadlineConnection` (the
  pools' connection class) hands its socket to the watchdog at the attempt's deadline, which
  travels in a threading.local (delivery/watchdog.py, `attempting()`).
- The receiver's time is taken on the same Attempt: when the request was written and when the
  reply's first byte was read (`_CheckedResponse`), so the 10 s rule leaves out the sender's own
  waits (the lookup, connecting, TLS).
- http.client takes a reply whose connection ends inside the status line or headers as complete
  (an end of stream ends its header loop like a blank line); `_CheckedResponse` refuses it (`CutHead`).
- Connections are kept alive per (address, host), never reused after IDLE_SECONDS idle.
"""
import http.client
import ssl
import time

import requests
import urllib3
from requests.adapters import HTTPAdapter
from urllib3.util.ssl_ import create_urllib3_context

from delivery import watchdog

IDLE_SECONDS = 20.0     # an idle kept-alive connection older than this is not reused
POOL_HOSTS = 1024       # (address, host) pools kept; the least recently used beyond this is closed


class CutHead(http.client.HTTPException):
    """The reply ended before the blank line that closes its status line and headers."""


class _HeadReader:
    """The reply's reader while http.client reads the head from it (only readline and close):
    keeps the first and last line read and the bytes of the head."""

    __slots__ = ("fp", "first", "last", "size")

    def __init__(self, fp):
        self.fp, self.first, self.last, self.size = fp, None, None, 0

    def readline(self, limit=-1):
        line = self.fp.readline(limit)
        if self.first is None:
            self.first = line
        self.last = line
        self.size += len(line)
        return line

    def close(self):
        self.fp.close()


class _CheckedResponse(http.client.HTTPResponse):
    """http.client's response, noting when the first byte came and refusing a head cut short."""

    def begin(self):
        if self.headers is not None:
            return
        attempt = watchdog.current()
        if self.fp.peek(1) and attempt is not None:  # waits for the first byte; it stays buffered
            attempt.answered = time.monotonic()
        reader = _HeadReader(self.fp)
        self.fp = reader
        try:
            super().begin()
        finally:
            if self.fp is reader:  # else http.client closed it (self.fp is None)
                self.fp = reader.fp
        if reader.last not in (b"\r\n", b"\n"):  # an end of stream, not a blank line, ended the headers
            self._close_conn()
            first = reader.first.rstrip(b"\r\n")[:40].decode("iso-8859-1")
            raise CutHead(f"reply cut short before the end of its headers, after {reader.size} bytes "
                          f"beginning {first!r}")


class _DeadlineConnection(urllib3.connection.HTTPSConnection):
    """A urllib3 HTTPS connection whose socket the watchdog cuts at the attempt's deadline."""

    response_class = _CheckedResponse
    exchanges = 0   # requests sent since this connection was (re)connected

    def _new_conn(self):
        sock = super()._new_conn()
        attempt = watchdog.current()
        if attempt is not None:
            # The TLS handshake is bounded as a whole by the socket timeout (CPython's
            # do_handshake keeps one deadline), so it also ends at the attempt's deadline.
            sock.settimeout(max(0.001, attempt.deadline - time.monotonic()))
        return sock

    def connect(self):
        self.exchanges = 0
        super().connect()
        attempt = watchdog.current()
        if attempt is not None:
            attempt.watch(self.sock)

    def request(self, *args, **kwargs):
        attempt = watchdog.current()
        if attempt is not None:
            attempt.reused = self.exchanges > 0
            attempt.watch(self.sock)
        self.exchanges += 1
        try:
            return super().request(*args, **kwargs)
        finally:
            if attempt is not None:
                # Also when writing failed: urllib3 may still read a reply the receiver sent early.
                attempt.written = time.monotonic()


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
        attempt = watchdog.current()
        if conn is not None:
            # Unwatch before the connection can go to another thread; one the deadline cut is not kept.
            if attempt is not None and attempt.release(conn.sock):
                conn.close()
            conn.idle_since = time.monotonic()
        super()._put_conn(conn)


class _PinnedAdapter(HTTPAdapter):
    """Sends to the checked address only, with SNI and certificate checks against the real host name."""

    def __init__(self, ssl_context, **kwargs):
        self.ssl_context = ssl_context
        super().__init__(**kwargs)

    def init_poolmanager(self, *args, **kwargs):
        super().init_poolmanager(*args, ssl_context=self.ssl_context, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {**self.poolmanager.pool_classes_by_scheme,
                                                   "https": _DeadlinePool}

    def cert_verify(self, conn, url, verify, cert):
        # Every pool verifies against self.ssl_context, whose CA bundle was loaded once.
        conn.cert_reqs = "CERT_REQUIRED"

    def build_connection_pool_key_attributes(self, request, verify, cert=None):
        host_params, pool_kwargs = super().build_connection_pool_key_attributes(request, verify, cert)
        attempt = watchdog.current()
        if (attempt is None or host_params["scheme"] != "https"
                or host_params["host"] != attempt.target.address):
            raise requests.exceptions.InvalidURL(f"{request.url} is not the checked address of this attempt")
        pool_kwargs["server_hostname"] = attempt.target.host
        pool_kwargs["assert_hostname"] = attempt.target.host
        return host_params, pool_kwargs


class CaBundleError(ValueError):
    """A CA bundle that cannot be read or holds no PEM certificate: a setting to fix."""


class Client:
    """HTTPS requests to the checked address of this thread's attempt (`attempting`), verified against
    every CA of the bundles `ca_files`, with up to `pool_size` kept-alive connections per (address, host).

    Nothing of a requests Session: no default headers, cookies, environment settings, hooks or redirects.
    """

    def __init__(self, ca_files, pool_size):
        context = create_urllib3_context(cert_reqs=ssl.CERT_REQUIRED)
        for ca_file in ca_files:  # a bad CA bundle setting fails here, once, not per attempt
            try:
                context.load_verify_locations(cafile=ca_file)
            except (OSError, ssl.SSLError) as error:
                raise CaBundleError(f"cannot load {ca_file} as PEM CA certificates "
                                    f"(SHIPTRACK_WEBHOOK_CA_BUNDLE): {error}") from None
        self.adapter = _PinnedAdapter(context, pool_connections=POOL_HOSTS, pool_maxsize=pool_size)

    def post(self, url, body, headers, timeout):
        """POST `body` (bytes) with exactly `headers` and Content-Length; a streamed requests Response."""
        request = requests.PreparedRequest()
        request.prepare_method("POST")
        request.prepare_url(url, None)
        request.prepare_headers(headers)
        request.prepare_body(body, None)
        return self.adapter.send(request, stream=True, timeout=timeout, verify=True, proxies={})

    def close(self):
        """Close every kept-alive connection."""
        self.adapter.close()
