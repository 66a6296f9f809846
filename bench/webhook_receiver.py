"""The receiver of bench/webhooks.py: local HTTPS endpoints that count what arrives.

One process, one thread per connection, a minimal HTTP/1.1 reader (request line, headers,
Content-Length body) instead of http.server, whose per-request header parsing made the receiver
cost more CPU than the sender it measured.  Every request is answered 200 (after 9 s on /slow),
counted per endpoint by webhook-id (duplicates are ids seen twice) and its signature verified.
The bench asks for the counts over a pipe.
"""
import base64
import hashlib
import hmac
import json
import multiprocessing
import resource
import socket
import ssl
import tempfile
import threading
import time

import trustme

REPLY = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: text/plain\r\n\r\nok"
NAMES = ("fast-a", "fast-b", "fast-c", "slow")


class Endpoint:
    """What one endpoint received."""

    def __init__(self, name):
        self.name, self.key = name, None
        self.seen = {}  # webhook-id -> times received
        self.first = self.last = None
        self.bad_signatures = 0

    def summary(self):
        arrived = sum(self.seen.values())
        return {"arrived": arrived, "distinct": len(self.seen), "duplicates": arrived - len(self.seen),
                "first": self.first, "last": self.last, "bad_signatures": self.bad_signatures}


class State:
    def __init__(self):
        self.lock = threading.Lock()
        self.endpoints = {name: Endpoint(name) for name in NAMES}
        self.watching = None  # {shipment id: first arrival at fast-a} while the watch phase runs

    def record(self, endpoint, headers, body, arrived):
        message_id = headers.get(b"webhook-id", b"").decode()
        timestamp = headers.get(b"webhook-timestamp", b"").decode()
        good = False
        if endpoint.key is not None:
            digest = hmac.new(endpoint.key, f"{message_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
            good = hmac.compare_digest(b"v1," + base64.b64encode(digest), headers.get(b"webhook-signature", b""))
        shipment = None
        if self.watching is not None and endpoint.name == "fast-a":
            shipment = json.loads(body)["data"]["object"]["id"]
        with self.lock:
            endpoint.seen[message_id] = endpoint.seen.get(message_id, 0) + 1
            endpoint.first = arrived if endpoint.first is None else endpoint.first
            endpoint.last = arrived
            endpoint.bad_signatures += not good
            if shipment is not None:
                self.watching.setdefault(shipment, arrived)


def _connection(sock, context, endpoint, state):
    """Serve one kept-alive connection until the client closes it."""
    try:
        sock = context.wrap_socket(sock, server_side=True)
        buffer = b""
        while True:
            while b"\r\n\r\n" not in buffer:
                data = sock.recv(65536)
                if not data:
                    return
                buffer += data
            head, _, buffer = buffer.partition(b"\r\n\r\n")
            headers = {}
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                headers[name.strip().lower()] = value.strip()
            length = int(headers.get(b"content-length", b"0"))
            while len(buffer) < length:
                data = sock.recv(65536)
                if not data:
                    return
                buffer += data
            body, buffer = buffer[:length], buffer[length:]
            arrived = time.time()
            if endpoint.name == "slow":
                time.sleep(9)
            sock.sendall(REPLY)
            state.record(endpoint, headers, body, arrived)
    except (OSError, ValueError):
        pass
    finally:
        sock.close()


def _accept(listener, context, endpoint, state):
    while True:
        sock, _ = listener.accept()
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=_connection, args=(sock, context, endpoint, state), daemon=True).start()


def serve(cert_pem, key_pem, control):
    """Receiver process: the endpoints on 127.0.0.1, then answer the bench's questions on `control`."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    with tempfile.NamedTemporaryFile("wb", suffix=".pem") as handle:
        handle.write(cert_pem + key_pem)
        handle.flush()
        context.load_cert_chain(handle.name)
    state, ports = State(), {}
    for name, endpoint in state.endpoints.items():
        listener = socket.create_server(("127.0.0.1", 0), backlog=1024)
        ports[name] = listener.getsockname()[1]
        threading.Thread(target=_accept, args=(listener, context, endpoint, state), daemon=True).start()
    control.send(ports)
    while True:
        command, argument = control.recv()
        if command == "secrets":
            for name, secret in argument.items():
                state.endpoints[name].key = base64.b64decode(secret.removeprefix("whsec_"))
            control.send(None)
        elif command == "stats":
            usage = resource.getrusage(resource.RUSAGE_SELF)
            with state.lock:
                control.send({"endpoints": {n: e.summary() for n, e in state.endpoints.items()},
                              "cpu_seconds": usage.ru_utime + usage.ru_stime})
        elif command == "watch":  # start (or stop) noting first arrivals per shipment at fast-a
            with state.lock:
                state.watching = {} if argument else None
            control.send(None)
        elif command == "arrivals":
            with state.lock:
                control.send(dict(state.watching or {}))


def start():
    """This receiver in a process of its own, with a new test CA: (process, control pipe, port per endpoint
    name, path of a CA bundle trusting it). The caller terminates the process and removes the file."""
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    with tempfile.NamedTemporaryFile("wb", suffix=".pem", delete=False) as bundle:
        bundle.write(ca.cert_pem.bytes())
    control, theirs = multiprocessing.Pipe()
    process = multiprocessing.Process(target=serve, daemon=True, args=(
        cert.cert_chain_pems[0].bytes(), cert.private_key_pem.bytes(), theirs))
    process.start()
    return process, control, control.recv(), bundle.name
