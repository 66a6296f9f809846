"""Pieces of the webhook tests: real HTTPS receivers on 127.0.0.1, a test resolver, passes and clocks.

The receivers' certificates come from a CA made by `trustme` (fixtures in tests/conftest.py); the
sender trusts it through the CA-bundle setting and reaches 127.0.0.1 through the allowed-networks
setting.
"""
import http.server
import ipaddress
import json
import os
import re
import socket
import socketserver
import subprocess
import sys
import threading
import time
from datetime import timedelta

from config import load_config
from delivery import signing, ssrf
from delivery.settings import Settings
from delivery.worker import Dispatcher
from models import webhooks
from models.webhook_deliveries import ClaimedDelivery
from tests.support import ROOT

RECEIVER_HOST = "receiver.test"
# The tests' secret key (SECRET_KEY): the app of make_app, delivery_settings and pass_process share it.
TEST_SECRET_KEY = "zrCOkWT4a_0mBspPaErZO68O2KOjOO97H6QZvx5N1Yk="


class Handler(http.server.BaseHTTPRequestHandler):
    """Answers by path: /ok, /status/<code>, /sleep/<seconds>, /redirect, /big, /drip/<seconds> (a 200 whose body
    drips), /drip-head/<seconds> (the status line and headers drip), /short (ends before its Content-Length)."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        arrived = time.time()
        self.server.requests.append({"path": self.path, "headers": dict(self.headers.items()),
                                     "body": body, "arrived": arrived})
        with self.server.lock:
            self.server.active += 1
            self.server.most_active = max(self.server.most_active, self.server.active)
        try:
            self._answer()
        finally:
            with self.server.lock:
                self.server.active -= 1

    def _answer(self):
        if self.server.force_status is not None:
            return self._reply(self.server.force_status, b"forced")
        parts = self.path.strip("/").split("/")
        action, argument = parts[0], (parts[1] if len(parts) > 1 else None)
        if action == "sleep":
            time.sleep(float(argument))
        if action == "status":
            return self._reply(int(argument), b"nope")
        if action == "redirect":
            self.send_response(302)
            self.send_header("Location", "https://127.0.0.1:1/elsewhere")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None
        if action == "drip-head":
            head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\nok"
            finish = time.monotonic() + float(argument)
            try:
                for byte in head:
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(max(0.0, (finish - time.monotonic()) / 3))
            except OSError:
                pass
            self.close_connection = True
            return None
        if action == "short":
            self.send_response(200)
            self.send_header("Content-Length", "100")
            self.end_headers()
            self.wfile.write(b"only ten b")
            self.close_connection = True
            return None
        if action == "big":
            return self._reply(200, b"x" * (5 * 1024 * 1024))
        if action == "drip":
            self.send_response(200)
            self.send_header("Content-Length", "100000")
            self.end_headers()
            finish = time.monotonic() + float(argument)
            try:
                while time.monotonic() < finish:
                    self.wfile.write(b"y")
                    self.wfile.flush()
                    time.sleep(0.2)
            except OSError:
                pass
            self.close_connection = True
            return None
        return self._reply(200, b'{"received":true}')

    def _reply(self, status, payload):
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        try:
            self.wfile.write(payload)
        except OSError:
            pass


class Receiver(socketserver.ThreadingMixIn, http.server.HTTPServer):
    """A threaded HTTPS server recording every request it gets."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, context):
        super().__init__(("127.0.0.1", 0), Handler)
        self.socket = context.wrap_socket(self.socket, server_side=True)
        self.requests = []
        self.force_status = None  # answer every request with this status when set
        self.lock = threading.Lock()
        self.active = 0  # requests being answered now
        self.most_active = 0  # the most answered at once
        self.errors = []  # what a request's handler raised (a sender that went away mid-request)

    def handle_error(self, request, client_address):
        # Kept, not printed: socketserver prints to sys.stderr, which a CLI runner of the same test may hold
        # at that moment, so the traceback landed in a command's output.
        self.errors.append(sys.exc_info()[1])

    def url(self, path="/ok", host=RECEIVER_HOST):
        """A URL of this receiver under `host`."""
        return f"https://{host}:{self.server_address[1]}{path}"


class RawReceiver:
    """A TLS server on 127.0.0.1 that reads each request whole, then writes `reply` and closes.

    `reply` is a list of bytes (written as they are), numbers (seconds to wait) and threading.Events
    (waited for, up to a minute: the test says when the reply goes on), so that a reply can be cut
    anywhere or dripped, which http.server cannot do. Each connection is handled (TLS handshake
    included) on a thread of its own.
    """

    def __init__(self, context, reply):
        self.context, self.reply = context, reply
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.requests = []  # {"read": monotonic time the request was read whole, "head", "body"}
        self.closed = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def url(self, path="/hook", host=RECEIVER_HOST):
        """A URL of this receiver under `host`."""
        return f"https://{host}:{self.listener.getsockname()[1]}{path}"

    def close(self):
        """Stop accepting and cut every reply still being written."""
        self.closed.set()
        self.listener.close()

    def _serve(self):
        while not self.closed.is_set():
            try:
                sock, _address = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(sock,), daemon=True).start()

    def _answer(self, sock):
        try:
            with self.context.wrap_socket(sock, server_side=True) as conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    data += chunk
                head, _, body = data.partition(b"\r\n\r\n")
                length = int(re.search(rb"(?im)^content-length: *(\d+)", head).group(1))
                while len(body) < length:
                    body += conn.recv(65536)
                self.requests.append({"read": time.monotonic(), "head": head, "body": body})
                for step in self.reply:
                    if isinstance(step, bytes):
                        conn.sendall(step)
                    elif isinstance(step, threading.Event):
                        step.wait(60)
                    elif self.closed.wait(step):
                        return
        except OSError:
            pass  # the sender cut the connection (its deadline), or the test is over


def resolver(host, port):
    """Resolves receiver.test (and *.receiver.test) to 127.0.0.1 and everything else as usual."""
    if host == RECEIVER_HOST or host.endswith("." + RECEIVER_HOST):
        return [ipaddress.ip_address("127.0.0.1")]
    return ssrf.resolve(host, port)


class Clock:
    """A controllable clock for the retry schedule and the disabling rules."""

    def __init__(self, now):
        self.now = now

    def __call__(self):
        return self.now

    def advance(self, **delta):
        """Move the clock forward."""
        self.now += timedelta(**delta)


def event_bodies(receiver):
    """The JSON bodies the receiver got, in arrival order."""
    return [json.loads(request["body"]) for request in receiver.requests]


def add_endpoint(conn, org, url, types=webhooks.EVENT_TYPES):
    """An enabled endpoint; returns its row (with the secret)."""
    return webhooks.create_endpoint(conn, org, url, types, None, signing.new_secret())


def delivery_settings(**config):
    """Delivery settings from the settings table and `config` (upper-case keys), ignoring the environment."""
    return Settings.from_config(load_config({"DATABASE_URL": "unused", "SECRET_KEY": TEST_SECRET_KEY, **config},
                                            environment=False))


def claimed_delivery(url, secret, event_id=7, body="{}"):
    """A delivery as if claimed, to hand to the sender without a database."""
    return ClaimedDelivery(id=1, event_id=event_id, endpoint_id=1, reason="scheduled", attempt=1, max_attempts=8,
                           lease_token="0" * 32, attempt_id=1, url=url, secret=secret, type="webhook.test",
                           body=body)


def run_pass(settings, clock=None, seconds=5, resolve=resolver, **deadlines):
    """One delivery pass in this process with the test resolver (or `resolve`) and the sender's
    `deadlines` (answer_seconds, total_seconds) when given."""
    kwargs = {"clock": clock} if clock else {}
    dispatcher = Dispatcher(settings, sender=settings.make_sender(resolve, **deadlines), **kwargs)
    try:
        dispatcher.run_pass(seconds)
    finally:
        dispatcher.close()


def pass_process(database_url, ca_bundle, *args, **settings):
    """`python -m delivery ARGS` as a child process allowed to reach the local receiver.

    `settings` become SHIPTRACK_<KEY> variables (JSON values).
    """
    env = {**os.environ, "DATABASE_URL": database_url, "SHIPTRACK_WEBHOOK_ALLOWED_NETWORKS": '["127.0.0.1/32"]',
           "SHIPTRACK_WEBHOOK_CA_BUNDLE": ca_bundle, "SHIPTRACK_SECRET_KEY": TEST_SECRET_KEY,
           **{f"SHIPTRACK_{key}": json.dumps(value) for key, value in settings.items()}}
    return subprocess.Popen([sys.executable, "-m", "delivery", *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
