"""Clients that send a request a byte a second or read an answer a few bytes a second, and probes of the others."""
import select
import socket
import threading
import time
from dataclasses import dataclass, field

import requests


def slow_head(host, token=None):
    """A GET whose whole head is sent slowly (the token, if any, is in it)."""
    lines = ["GET /organization HTTP/1.1", f"Host: {host}"]
    if token:
        lines.append(f"Authorization: Bearer {token}")
    return b"", ("\r\n".join(lines) + "\r\nX-Padding: " + "x" * 200 + "\r\n\r\n").encode()


def slow_body(host, token=None):
    """A POST /mcp whose head is sent at once and whose JSON-RPC message (200 bytes) is sent slowly."""
    message = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}'.ljust(200)
    lines = ["POST /mcp HTTP/1.1", f"Host: {host}", "Content-Type: application/json",
             "Accept: application/json, text/event-stream", f"Content-Length: {len(message)}"]
    if token:
        lines.append(f"Authorization: Bearer {token}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode(), message


def trickled_body():
    """A POST /mcp of 65,536 bytes without a token: (its head and 17,000 bytes of its body, the rest to trickle)."""
    body = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}'.ljust(65536)
    head = (b"POST /mcp HTTP/1.1\r\nHost: shiptrack.example\r\nContent-Type: application/json\r\n"
            b"Accept: application/json, text/event-stream\r\nContent-Length: 65536\r\n\r\n")
    return head + body[:17000], body[17000:]


@dataclass
class Connection:
    """What one slow connection got: seconds from its first byte to the server's answer or close, and the answer."""

    seconds: float
    received: bytes


@dataclass
class SlowClient:
    """One client sending `head` at once and `trickle` a byte a second, on a new connection each time one ends."""

    address: tuple
    head: bytes
    trickle: bytes
    connections: list = field(default_factory=list)

    def run(self, stop):
        """Until `stop` is set."""
        while not stop.is_set():
            try:
                sock = socket.create_connection(self.address, timeout=5)
            except OSError:
                stop.wait(0.2)
                continue
            with sock:
                self._send(sock, stop)

    def _send(self, sock, stop):
        started, received = time.monotonic(), b""
        try:
            sock.sendall(self.head)
            for number in range(len(self.trickle)):
                sock.sendall(self.trickle[number:number + 1])
                # A second between bytes, unless the server answers or closes meanwhile.
                if select.select([sock], [], [], 1.0)[0] or stop.is_set():
                    break
            while not stop.is_set() and select.select([sock], [], [], 0.5)[0]:
                data = sock.recv(65536)
                if not data:
                    break
                received += data
        except OSError:
            pass  # reset by the server: recorded as what was received until then
        if not stop.is_set():
            self.connections.append(Connection(time.monotonic() - started, received))


class SlowClients:
    """A SlowClient per (head, trickle) of `sends` against `address`, for as long as the block runs."""

    def __init__(self, address, sends):
        self.clients = [SlowClient(address, head, trickle) for head, trickle in sends]
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=client.run, args=(self.stop,), daemon=True) for client in self.clients]

    def __enter__(self):
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *_exc):
        self.stop.set()
        for thread in self.threads:
            thread.join(10)


def answered_in(url, headers, within):
    """The seconds a GET of `url` took to answer 200, or None when it did not within `within` seconds."""
    started = time.monotonic()
    try:
        answered = requests.get(url, headers=headers, timeout=within).status_code == 200
    except requests.RequestException:
        answered = False
    took = time.monotonic() - started
    return took if answered and took <= within else None


def probe(base, token, seconds, within=2.0):
    """{path: (answered 200 within `within` seconds, sent)} of GET /healthz and GET /organization, for `seconds`."""
    paths = {"/healthz": {}, "/organization": {"Authorization": f"Bearer {token}"}}
    counts = {path: [0, 0] for path in paths}
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for path, headers in paths.items():
            counts[path][0] += answered_in(base + path, headers, within) is not None
            counts[path][1] += 1
        time.sleep(0.2)
    return {path: tuple(count) for path, count in counts.items()}


class SlowReaders:
    """`count` connections to `address` each sending `request` and reading its answer at `rate` bytes a second.

    Each socket's receive buffer is made small before it connects, so the server's writes wait on the reader
    soon (the kernel would otherwise take megabytes off the server's hands). `rate=0` never reads.
    """

    def __init__(self, address, request, count, rate=64):
        self.sockets = []
        for _ in range(count):
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.settimeout(10)
            sock.connect(address)
            self.sockets.append(sock)
        self.request, self.rate = request, rate
        self.received = [b""] * count
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._read, daemon=True)

    def __enter__(self):
        for sock in self.sockets:
            sock.sendall(self.request)
        self.thread.start()
        return self

    def __exit__(self, *_exc):
        self.stop.set()
        self.thread.join(10)
        for sock in self.sockets:
            sock.close()

    def _read(self):
        # Eight reads a second of rate / 8 bytes each, none waiting.
        while self.rate and not self.stop.wait(0.125):
            for number, sock in enumerate(self.sockets):
                try:
                    self.received[number] += sock.recv(max(self.rate // 8, 1), socket.MSG_DONTWAIT)
                except OSError:
                    continue

    def started(self):
        """Whether every connection has received the status line of its answer."""
        return all(b"\r\n" in received for received in self.received)
