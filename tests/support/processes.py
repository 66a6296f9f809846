"""Waiting on things outside the test process: child processes, servers, ports."""
import json
import os
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from tests.support import ROOT


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def exchange(base, data, seconds=10):
    """Send raw bytes to the server at `base` (http://host:port), read until it closes: (status, headers, body)."""
    host, port = base.rsplit("/", 1)[1].split(":")
    with socket.create_connection((host, int(port)), timeout=seconds) as sock:
        sock.sendall(data)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), headers, body


def wait_for(predicate, seconds=20.0):
    """Poll `predicate` until it is true (True) or `seconds` pass (False)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def wait_listening(process, port, name, output, seconds=30):
    """Wait until `process` listens on 127.0.0.1:`port`; fails with `output()` if it exits first."""
    def listening():
        assert process.poll() is None, output()
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            return False

    assert wait_for(listening, seconds), f"{name} did not listen within {seconds} seconds"


@contextmanager
def gunicorn(database_url, tmp_path, workers=1, options=(), **settings):
    """The service under gunicorn with the project's gunicorn.conf.py on 127.0.0.1; yields its base URL.

    `options` are more command-line options; `settings` become SHIPTRACK_<KEY> variables (JSON values);
    the logs go to tmp_path: gunicorn's to gunicorn.log, the application's (its standard error) to app.log.
    """
    port = free_port()
    env = {**os.environ, "DATABASE_URL": database_url,
           **{f"SHIPTRACK_{key}": json.dumps(value) for key, value in settings.items()}}
    command = [str(Path(sys.executable).parent / "gunicorn"), "-c", "gunicorn.conf.py", "-w", str(workers),
               "-b", f"127.0.0.1:{port}", "--error-logfile", str(tmp_path / "gunicorn.log"), *options,
               "app:create_app()"]
    with open(tmp_path / "app.log", "wb") as app_log:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=app_log)
        try:
            wait_listening(process, port, "gunicorn", lambda: (tmp_path / "gunicorn.log").read_text())
            yield f"http://127.0.0.1:{port}"
        finally:
            stop(process)


def stop(process, seconds=10):
    """Terminate a child process, killing it when it has not exited within `seconds`."""
    process.terminate()
    try:
        process.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
