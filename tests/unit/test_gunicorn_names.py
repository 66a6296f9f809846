"""What serving.py (and held_requests.py) take from gunicorn beyond its settings and hooks, each named here.

serving.JsonErrorWorker overrides methods of gunicorn's gthread worker and reads attributes of its
connections and requests that gunicorn does not document. An upgrade that renames, drops or changes one
fails here, by name, instead of changing silently how a request is read or a connection counted and closed.
"""
import concurrent.futures
import inspect
import os
import socket

import pytest
from gunicorn import util
from gunicorn.config import Config
from gunicorn.http import wsgi
from gunicorn.http.body import LengthReader
from gunicorn.http.message import Request
from gunicorn.http.unreader import IterUnreader
from gunicorn.workers.gthread import TConn, ThreadWorker

import held_requests
import serving

# ThreadWorker's methods the worker overrides: each is called by gunicorn with the parameters ours take.
OVERRIDDEN = ["init_process", "load_wsgi", "handle", "finish_request", "handle_request", "handle_error", "handle_exit"]


@pytest.fixture
def worker():
    """A JsonErrorWorker as gunicorn makes one, not started."""
    made = serving.JsonErrorWorker(0, os.getpid(), [], None, 30, Config(), None)
    yield made
    made.tmp.close()


@pytest.mark.parametrize("name", OVERRIDDEN)
def test_the_overridden_methods_keep_their_parameters(name):
    # Overridden by serving.py's worker or by the held requests' part of it (held_requests.py).
    assert name in vars(serving.JsonErrorWorker) or name in vars(held_requests.HoldingWorker)
    ours, gunicorns = (inspect.signature(getattr(cls, name)) for cls in (serving.JsonErrorWorker, ThreadWorker))
    assert list(ours.parameters) == list(gunicorns.parameters)


class _Connection:
    """What finish_request is handed: records how it was closed."""

    closed = None

    def close(self, graceful=False):
        self.closed = "gracefully" if graceful else "at once"


def _finished(result):
    future = concurrent.futures.Future()
    future.set_result(result)
    return future


def test_a_connection_closed_in_its_thread_is_counted_off_as_gthread_counts_off_one_it_closes(worker):
    # gthread's finish_request closes a finished connection in the worker's loop and takes it off
    # nr_conns (the worker accepts new connections while nr_conns < worker_connections).
    connection = _Connection()
    worker.nr_conns = 2
    ThreadWorker.finish_request(worker, connection, _finished(False))
    assert (worker.nr_conns, connection.closed) == (1, "gracefully")
    # Ours: handle() closed it already (serving._CLOSED), so it is only counted off, never closed again.
    connection = _Connection()
    worker.finish_request(connection, _finished(serving._CLOSED))
    assert (worker.nr_conns, connection.closed) == (0, None)


def test_a_new_connection_is_a_plain_socket_in_tconn_sock():
    ours, peer = socket.socketpair()
    with ours, peer:
        connection = TConn(Config(), ours, ("127.0.0.1", 1), ("127.0.0.1", 2))
        assert connection.sock is ours and type(connection.sock) is socket.socket


def test_a_request_expecting_100_continue_with_a_length():
    request = Request(Config(), IterUnreader([b"POST /mcp HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
                                              b"Content-Length: 5\r\n\r\nhello"]), ("127.0.0.1", 5))
    # receive_body sends the 100 Continue itself, since it reads the body before gunicorn makes the environ,
    # and clears the flag, which wsgi.create reads to send one.
    assert request._expected_100_continue is True
    assert "req._expected_100_continue" in inspect.getsource(wsgi.create)
    # A declared length past the body limit is refused unread; must_close ends the connection after the answer.
    assert isinstance(request.body.reader, LengthReader) and request.body.reader.length == 5
    assert request.must_close is False


def test_what_handle_error_writes_with():
    ours, peer = socket.socketpair()
    with ours, peer:
        request = Request(Config(), IterUnreader([b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"]), ("127.0.0.1", 5))
        assert wsgi.default_environ(request, ours, Config())["gunicorn.socket"] is ours
        response = wsgi.Response(request, ours, Config())
        # The access line reads status and the bytes sent of the response handle_error makes.
        assert {"status", "response_length", "sent"} <= set(vars(response))
        util.write_nonblock(ours, b"x")
        assert peer.recv(1) == b"x"
        peer.shutdown(socket.SHUT_WR)  # close_graceful waits for the client's close
        util.close_graceful(ours)
        assert peer.recv(1) == b""


def test_what_held_requests_take_from_gthread(worker):
    # serving.py parks a held request's connection in the worker's selector (`poller`, made in init_process),
    # runs it again with enqueue_req (a thread, then finish_request in the main loop), moves work to the main
    # loop through method_queue.defer from any thread, counts it in nr_conns while parked, and reads `alive`.
    assert "self.poller = selectors.DefaultSelector()" in inspect.getsource(ThreadWorker.init_process)
    assert list(inspect.signature(ThreadWorker.enqueue_req).parameters) == ["self", "conn"]
    assert "self.tpool.submit(self.handle, conn)" in inspect.getsource(ThreadWorker.enqueue_req)
    assert "self.finish_request, conn, fut" in inspect.getsource(ThreadWorker.enqueue_req)
    assert worker.nr_conns == 0 and worker.alive is True
    # handle_exit (SIGTERM) only marks the worker stopping and wakes its loop: our override answers the held.
    assert "self.alive = False" in inspect.getsource(ThreadWorker.handle_exit)
    called = []
    worker.method_queue.init()
    try:
        worker.method_queue.defer(called.append, "run in the main loop")
        worker.method_queue.run_callbacks(None)
    finally:
        worker.method_queue.close()
    assert called == ["run in the main loop"]
    # The main loop's graceful stop waits while nr_conns > 0: the held are answered within it.
    assert "while self.nr_conns > 0:" in inspect.getsource(ThreadWorker.run)
