"""A TCP forwarder on 127.0.0.1 that can be stopped, started, and made to hang: a database outage on demand.

`stop()` closes the listening socket and every forwarded connection (clients read EOF, as when a
server restarts or a network path drops them); new connections are refused until `start()`
listens again on the same port. `hang()` keeps accepting and keeps every connection open, but
nothing more passes either way (a frozen server, a network path that black-holes packets), until
`forward()` lets everything through again, what was held included. `delay(seconds)` makes each byte
arrive that much later, each way (a round trip 2 x seconds slower), without slowing the flow otherwise: a
distant or congested database that still answers every statement.
"""
import queue
import socket
import threading
import time

from tests.support.processes import free_port


class TcpProxy:
    """Forwards 127.0.0.1:`port` to `target`: (host, port), or (socket directory, port) of a local PostgreSQL."""

    def __init__(self, target, port=None):
        self.target = target
        self.port = port or free_port()
        self._lock = threading.Lock()
        self._listener = None
        self._sockets = set()
        self._flowing = threading.Event()  # cleared while hanging: every pump waits before passing data on
        self._flowing.set()
        self.latency = 0.0  # seconds added to each byte's way, each direction (delay())

    def start(self):
        """Listen (again) on the proxy's port."""
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()
        return self

    def stop(self):
        """Refuse new connections and cut every open one."""
        self._flowing.set()
        listener, self._listener = self._listener, None
        if listener is not None:
            _close(listener)
        with self._lock:
            sockets, self._sockets = self._sockets, set()
        for sock in sockets:
            _close(sock)

    def hang(self):
        """Accept connections and hold every byte, both ways, until forward()."""
        self._flowing.clear()

    def forward(self):
        """Pass bytes on again, those held while hanging first."""
        self._flowing.set()

    def delay(self, seconds):
        """From now on, every byte reaches the other side `seconds` later than it would (0: no delay)."""
        self.latency = seconds

    def url(self, database_url):
        """`database_url` with its host and port replaced by the proxy's."""
        from psycopg2.extensions import make_dsn, parse_dsn

        return make_dsn(**{**parse_dsn(database_url), "host": "127.0.0.1", "port": str(self.port)})

    def _accept(self, listener):
        while True:
            try:
                client, _address = listener.accept()
            except OSError:
                return  # stopped
            threading.Thread(target=self._join, args=(listener, client), daemon=True).start()

    def _join(self, listener, client):
        self._flowing.wait()  # a connection accepted while hanging reaches the server only once it ends
        try:
            upstream = self._connect_upstream()
        except OSError:
            _close(client)
            return
        with self._lock:
            if self._listener is not listener:  # stopped meanwhile
                _close(client)
                _close(upstream)
                return
            self._sockets.update((client, upstream))
        for source, sink in ((client, upstream), (upstream, client)):
            threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _connect_upstream(self):
        host, port = self.target
        if host.startswith("/"):  # a PostgreSQL socket directory (the embedded server)
            upstream = socket.socket(socket.AF_UNIX)
            upstream.settimeout(5)
            upstream.connect(f"{host}/.s.PGSQL.{port}")
        else:
            upstream = socket.create_connection((host, port), timeout=5)
        upstream.settimeout(None)
        return upstream

    def _pump(self, source, sink):
        # Bytes go through `late` (kept in order, each sent when due) to a sender of their own, so that
        # a delay holds each chunk back without holding back the reading of the next.
        late = queue.SimpleQueue()
        sender = threading.Thread(target=self._send_when_due, args=(late, sink), daemon=True)
        sender.start()
        try:
            while data := source.recv(65536):
                late.put((time.monotonic() + self.latency, data))
        except OSError:
            pass
        finally:
            late.put((0.0, None))
            sender.join(60)
            for sock in (source, sink):
                _close(sock)
            with self._lock:
                self._sockets.difference_update((source, sink))

    def _send_when_due(self, late, sink):
        try:
            while (item := late.get())[1] is not None:
                due, data = item
                time.sleep(max(0.0, due - time.monotonic()))
                self._flowing.wait()
                sink.sendall(data)
        except OSError:
            pass

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def _close(sock):
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()
