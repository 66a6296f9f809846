"""HTTPS POST of one signed webhook to the checked address, with the spec's deadlines, on `requests`.

The TCP connection goes to the address the SSRF guard checked; TLS is verified against the URL's
host name (SNI and certificate), so no second DNS lookup can redirect the request
(delivery/transport.py: the pinned adapter, the deadline on every socket, kept-alive pools). The DNS
lookup of the SSRF guard runs on a small thread pool, so that it too ends at the deadline
(getaddrinfo cannot be interrupted: a stuck lookup keeps its thread, not the worker).

Two clocks (docs/webhooks.md, "Requests"): the 15 s are the sender's, from the start of the
attempt (the lookup included) to the reply's first 2 KB read (or all of it, when shorter); a reply
not complete at the deadline is a failure, whatever status line came first. The 10 s are the
receiver's, from the request written to the reply's first byte read: the sender's own waits
(the lookup pool, connecting, TLS) do not count against the receiver.

The receivers' certificates are verified against certifi's public roots plus, when set, the extra
CA bundle of WEBHOOK_CA_BUNDLE (a test or demo CA, or a company's own).

Also here: one attempt of a claimed delivery (`send_delivery`, shared by the delivery loop and the
CLI's `webhooks test` / `resend`) and the Prometheus metrics counting attempts.
"""
import concurrent.futures
import http.client
import socket
import ssl
import logging
import time
from dataclasses import dataclass
from datetime import datetime, timezone

import certifi
import requests
import urllib3
from prometheus_client import Counter, Histogram, start_http_server
from urllib3.util import SKIP_HEADER

from delivery import signing, ssrf, transport, watchdog
from delivery.secret_key import UNUSABLE
from models.webhook_deliveries import ClaimedDelivery
from rendering.ids import PREFIXES, format_id

log = logging.getLogger("delivery")

ANSWER_SECONDS = 10.0   # a 2xx reply must begin within this after the request was written
TOTAL_SECONDS = 15.0    # the sender stops waiting after this, in all
KEEP_BYTES = 2048       # only the first 2 KB of a reply is read and kept
# Socket timeouts are only a backstop behind the watchdog once the socket is watched,
# so that the deadline is reported as such, not as a socket timeout that raced it.
BACKSTOP_SECONDS = 1.0

# OpenSSL's verify codes (X509_V_ERR_*) for a chain ending at a CA not trusted here: the one case a setting fixes.
UNKNOWN_ISSUER = (2, 18, 19, 20, 21)
# Errors of a kept-alive connection the receiver had closed: the request is tried again on a fresh one.
_STALE = (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError)


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

    def __init__(self, *, ca_bundle, allowed_networks, service_domain, workers,
                 answer_seconds=ANSWER_SECONDS, total_seconds=TOTAL_SECONDS, resolver=None):
        # The extra CA adds to the public roots: receivers with public certificates stay reachable.
        # Idle connections kept per (address, host): never more are in flight than there are workers.
        self.client = transport.Client([certifi.where(), *([ca_bundle] if ca_bundle else [])], workers)
        self.adapter = self.client.adapter
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
            signed = signing.headers(secret, message_id, timestamp, body)
        except ValueError:
            return Outcome(False, None, UNUSABLE, None, None, _ms(started))
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
                   **signed,
                   "Accept-Encoding": SKIP_HEADER}  # http.client would add "Accept-Encoding: identity"
        # requests adds Content-Length for the bytes body.
        outcome = self._exchange(target, headers, body, started, may_retry=True)
        if outcome is None:  # a kept-alive connection the receiver had closed: once more on a fresh one
            outcome = self._exchange(target, headers, body, started, may_retry=False)
        return outcome

    def _exchange(self, target, headers, body, started, may_retry):
        deadline = started + self.total_seconds
        with watchdog.attempting(target, deadline) as attempt:
            remaining = max(0.001, deadline - time.monotonic())
            try:
                response = self.client.post(f"https://{_bracket(target.address)}:{target.port}{target.path}",
                                            body, headers, timeout=(remaining, remaining + BACKSTOP_SECONDS))
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
            return self._judge(response, attempt.waited(), kept, target, started)

    def _judge(self, response, waited, kept, target, started):
        status = response.status_code
        text = _text(kept)
        error = None
        if 300 <= status < 400:
            where = response.headers.get("Location")
            error = f"redirect ({status}) to {where!r} not followed" if where else f"redirect ({status}) not followed"
        elif not 200 <= status < 300:
            error = f"HTTP {status}"
        elif waited > self.answer_seconds:
            error = (f"answered after {waited:.1f} s (from the request sent to the reply's first byte); "
                     f"a reply must begin within {self.answer_seconds:g} s")
        return Outcome(error is None, status, error, text, target.address, _ms(started))

    def _failure(self, error, root, fired, target, started):
        if fired:
            message = f"no reply within {self.total_seconds:g} s; abandoned"
        elif isinstance(error, requests.Timeout) or isinstance(root, (socket.timeout, TimeoutError)):
            message = f"timed out after {time.monotonic() - started:.1f} s"
        elif isinstance(error, requests.exceptions.SSLError) or isinstance(root, (ssl.SSLError, ssl.CertificateError)):
            message = f"TLS error: {root}" + (" (a receiver's own CA is trusted with SHIPTRACK_WEBHOOK_CA_BUNDLE)"
                                              if getattr(root, "verify_code", None) in UNKNOWN_ISSUER else "")
        elif isinstance(root, ConnectionRefusedError):
            message = "connection refused"
        elif isinstance(root, transport.CutHead):
            message = str(root)
        else:
            message = f"{type(root).__name__}: {root}" if str(root) else type(root).__name__
        return Outcome(False, None, message, None, target.address, _ms(started))

    def close(self):
        """Close every kept-alive connection."""
        self.client.close()
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


def utcnow():
    """The real clock (tests pass their own)."""
    return datetime.now(timezone.utc)


@dataclass
class Result:
    """One finished attempt of a claimed delivery."""

    delivery: ClaimedDelivery
    attempted_at: datetime
    finished_at: datetime
    outcome: Outcome


def send_delivery(sender, delivery, clock=utcnow):
    """Send one ClaimedDelivery; returns its Result (webhook-timestamp is the real time of signing)."""
    attempted_at = clock()
    outcome = sender.send(delivery.url, delivery.secret, format_id(PREFIXES["webhook_event"], delivery.event_id),
                          delivery.body.encode(), time.time())
    return Result(delivery, attempted_at, clock(), outcome)


# The delivery process's metrics, served on DELIVERY_METRICS_PORT when it is set (off by default): each
# process serves its own counts (one process, one port); the web instances' /metrics carries the backlog
# gauges read from the database (api/metrics.py).
ATTEMPTS = Counter("shiptrack_webhook_attempts_total",
                   "Webhook attempts finished, by outcome: succeeded, http_error (the receiver answered other "
                   "than 2xx), no_response (refused, timed out, TLS or address refused), crashed (a bug).",
                   ["outcome"])
# A receiver has 15 s in all (docs/webhooks.md); most answer in tens of milliseconds.
ATTEMPT_DURATION = Histogram("shiptrack_webhook_attempt_duration_seconds",
                             "Time from sending a webhook to its answer (or giving up on it).",
                             buckets=(0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 15.0))


def serve_metrics(config):
    """Start the metrics server in a daemon thread when DELIVERY_METRICS_PORT is set; returns the port or None."""
    port = config["DELIVERY_METRICS_PORT"]
    if port is None:
        return None
    server, _thread = start_http_server(int(port), addr=config["DELIVERY_METRICS_HOST"])
    port = server.server_address[1]
    log.info("metrics served on http://%s:%s/metrics", config["DELIVERY_METRICS_HOST"], port)
    return port


def outcome_of(result):
    """The outcome label of a Result (None when the sender crashed)."""
    if result is None:
        return "crashed"
    if result.outcome.succeeded:
        return "succeeded"
    return "http_error" if result.outcome.status_code is not None else "no_response"


def observe_attempt(result):
    """Count one finished attempt and its duration."""
    ATTEMPTS.labels(outcome_of(result)).inc()
    if result is not None:
        ATTEMPT_DURATION.observe(result.outcome.duration_ms / 1000)
