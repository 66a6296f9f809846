"""Shared pieces of the webhook tests: a real HTTPS receiver on 127.0.0.1 and delivery settings.

The receiver's certificate comes from a CA made by `trustme`; the sender trusts it
through the CA-bundle setting and reaches 127.0.0.1 through the allowed-networks setting.
"""
import http.server
import ipaddress
import json
import socket
import socketserver
import ssl
import threading
import time

import pytest
import trustme

from delivery import ssrf
from delivery.settings import Settings

RECEIVER_HOST = "receiver.test"


class Handler(http.server.BaseHTTPRequestHandler):
    """Answers by path: /ok, /status/<code>, /sleep/<seconds>, /redirect, /big, /drip/<seconds>."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        arrived = time.time()
        self.server.requests.append({"path": self.path, "headers": dict(self.headers.items()),
                                     "body": body, "arrived": arrived})
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

    def url(self, path="/ok", host=RECEIVER_HOST):
        """A URL of this receiver under `host`."""
        return f"https://{host}:{self.server_address[1]}{path}"


@pytest.fixture(scope="session")
def ca():
    """A certificate authority made for the tests."""
    return trustme.CA()


@pytest.fixture(scope="session")
def ca_bundle(ca, tmp_path_factory):
    """The CA certificate as a PEM file (the WEBHOOK_CA_BUNDLE setting)."""
    path = tmp_path_factory.mktemp("ca") / "ca.pem"
    ca.cert_pem.write_to_path(str(path))
    return str(path)


@pytest.fixture
def receiver(ca):
    """A running HTTPS receiver on 127.0.0.1 with a certificate for receiver.test and 127.0.0.1."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(RECEIVER_HOST, "127.0.0.1").configure_cert(context)
    server = Receiver(context)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def resolver(host, port):
    """Resolves receiver.test (and *.receiver.test) to 127.0.0.1 and everything else as usual."""
    if host == RECEIVER_HOST or host.endswith("." + RECEIVER_HOST):
        return [ipaddress.ip_address("127.0.0.1")]
    return ssrf.resolve(host, port)


@pytest.fixture
def settings(database_url, ca_bundle):
    """Delivery settings for the test database and the local receiver."""
    return Settings(database_url=database_url, allowed_networks=["127.0.0.1/32"], ca_bundle=ca_bundle,
                    service_domain="shiptrack.example", workers=16, per_endpoint=4)


class Clock:
    """A controllable clock for the retry schedule and the disabling rules."""

    def __init__(self, now):
        self.now = now

    def __call__(self):
        return self.now

    def advance(self, **delta):
        """Move the clock forward."""
        from datetime import timedelta
        self.now += timedelta(**delta)


@pytest.fixture
def smtp_server():
    """A real SMTP server on 127.0.0.1 keeping every message it receives."""
    from aiosmtpd.controller import Controller

    class Inbox:
        def __init__(self):
            self.messages = []

        async def handle_DATA(self, server, session, envelope):
            self.messages.append({"from": envelope.mail_from, "to": list(envelope.rcpt_tos),
                                  "content": envelope.content.decode()})
            return "250 OK"

    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    inbox = Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=port)
    controller.start()
    yield {"port": port, "messages": inbox.messages}
    controller.stop()


def event_bodies(receiver):
    """The JSON bodies the receiver got, in arrival order."""
    return [json.loads(request["body"]) for request in receiver.requests]
