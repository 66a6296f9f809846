"""`python3 dev.py demo` as a user runs it: a verified webhook and a moving change feed within minutes; SIGTERM,
SIGHUP or Ctrl-C to dev.py alone stops everything it started; a restart keeps the token and makes nothing twice.

The demo runs in a copy of the checkout (on the same .venv) with DATABASE_URL unset, so its embedded
PostgreSQL keeps its data in the copy's .data/ and never meets the suite's, and on free ports.
"""
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import psutil
import pytest
import requests

from models import db
from tests.support import ROOT
from tests.support.processes import free_port, wait_for

pytestmark = pytest.mark.slow

BANNER_TOKEN = re.compile(r"^  Token +(sv_[A-Za-z0-9]{40}) ")
BANNER_DATABASE = re.compile(r"^  Database .* '(postgresql://[^']+)'$")
VERIFIED = re.compile(r"^receiver: (shipment\.[a-z_]+|alert\.created) (shp_\d+) (msg_\d+) signature verified")


class DemoRun:
    """One `python3 dev.py demo` in `checkout`, its output read line by line as it comes."""

    def __init__(self, checkout, port=None):
        self.checkout = checkout
        self.port, self.receiver_port = port or free_port(), free_port()
        env = {name: value for name, value in os.environ.items()
               if name != "DATABASE_URL" and not name.startswith("SHIPTRACK_")}
        env.update(PORT=str(self.port), DEMO_RECEIVER_PORT=str(self.receiver_port), DEMO_SIMULATE_EVERY="1",
                   WEB_CONCURRENCY="1")
        self.process = subprocess.Popen([sys.executable, "dev.py", "demo"], cwd=checkout, env=env, text=True,
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.lines = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        with self.process.stdout:
            for line in self.process.stdout:
                self.lines.append(line.rstrip("\n"))

    def find(self, pattern, seconds):
        """The first match of `pattern` in the output within `seconds` (None if none)."""
        found = []

        def seen():
            exited = self.process.poll() is not None
            found.extend(m for m in map(pattern.match, list(self.lines)) if m)
            assert found or not exited, "\n".join(self.lines[-40:])
            return bool(found)

        return found[0] if wait_for(seen, seconds) else None

    def base(self):
        """The API's base URL."""
        return f"http://127.0.0.1:{self.port}"

    def started(self):
        """Every process it runs now (children, grandchildren) and the embedded postmaster."""
        pids = {child.pid for child in psutil.Process(self.process.pid).children(recursive=True)}
        return pids | {int((self.checkout / ".data" / "pg" / "postmaster.pid").read_text().split()[0])}

    def stop(self, signum):
        """Send `signum` to dev.py alone; its exit status (None if it has not exited within the 10 s allowed)."""
        self.process.send_signal(signum)
        try:
            return self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            return None

    def kill(self):
        """Clean up after a failed test: end dev.py and everything it started, the postmaster with a fast shutdown."""
        if self.process.poll() is None:
            pids = self.started()
            self.process.kill()
            for pid in pids:
                try:
                    psutil.Process(pid).send_signal(signal.SIGINT)
                except psutil.NoSuchProcess:
                    pass
            self.process.wait()


def port_free(port):
    """Whether a server could listen on 127.0.0.1:port now (connections closing on it do not count, as for
    gunicorn, which sets SO_REUSEADDR too)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def running(pid):
    """Whether `pid` is a process that has not exited (a zombie, waiting to be reaped, has)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def assert_nothing_left(run, pids, status, signum):
    assert status == 128 + signum, "\n".join(run.lines[-30:])
    assert [pid for pid in pids if running(pid)] == [], "\n".join(run.lines[-30:])
    assert port_free(run.port) and port_free(run.receiver_port)
    assert not (run.checkout / ".data" / "pg" / "postmaster.pid").exists()


@pytest.fixture(scope="module")
def checkout():
    """A copy of the checkout without .data/ (and what is made at run time), on the same .venv.

    Not under pytest's tmp_path: as root the embedded server runs as another user, who must be able to reach
    its data folder, and every pytest session starting on the machine makes pytest's folder private again.
    """
    folder = Path(tempfile.mkdtemp(prefix="shiptrack-demo-"))
    copy = folder / "checkout"
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns(".data", ".venv", ".git", "storage", "node_modules",
                                                               "__pycache__", ".pytest_cache", "results"))
    (copy / ".venv").symlink_to((ROOT / ".venv").resolve())
    yield copy
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def first_run(checkout):
    """The first demo on the fresh copy: it makes the database, seeds, and prints the token."""
    run = DemoRun(checkout)
    try:
        yield run
    finally:
        run.kill()


def test_a_verified_webhook_and_a_moving_feed(first_run):
    token = first_run.find(BANNER_TOKEN, 90)
    assert token is not None, "\n".join(first_run.lines[-40:])
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {token.group(1)}"
    verified = first_run.find(VERIFIED, 60)
    assert verified is not None, "\n".join(first_run.lines[-40:])
    # The line names an event of the API, of that type and shipment, with that webhook-id.
    event_type, shipment, message = verified.groups()
    event = session.get(f"{first_run.base()}/events/{message}", timeout=10)
    assert event.status_code == 200
    assert (event.json()["type"], event.json()["data"]["object"].get("shipment_id")
            or event.json()["data"]["object"]["id"]) == (event_type, shipment)
    since = None
    while True:
        page = session.get(f"{first_run.base()}/changes", params={"since": since} if since else {}, timeout=10).json()
        since = page["next_since"]
        if not page["has_more"]:
            break
    moved = []
    assert wait_for(lambda: moved.extend(session.get(f"{first_run.base()}/changes", params={"since": since},
                                                     timeout=10).json()["data"]) or moved, 60)
    assert {item["object"] for item in moved} == {"shipment"}


def test_sigterm_to_dev_py_alone_leaves_nothing_running(first_run):
    assert first_run.find(BANNER_TOKEN, 90) is not None, "\n".join(first_run.lines[-40:])
    pids = first_run.started()
    assert len(pids) >= 6  # receiver, gunicorn and its worker, delivery, simulator, postmaster
    assert_nothing_left(first_run, pids, first_run.stop(signal.SIGTERM), signal.SIGTERM)


@pytest.mark.parametrize("signum", [signal.SIGHUP, signal.SIGINT], ids=["SIGHUP", "Ctrl-C"])
def test_a_restart_keeps_the_token_and_makes_nothing_twice(checkout, first_run, signum):
    token = first_run.find(BANNER_TOKEN, 90)
    assert token is not None, "\n".join(first_run.lines[-40:])
    if first_run.process.poll() is None:
        first_run.stop(signal.SIGTERM)
    run = DemoRun(checkout)
    try:
        again = run.find(BANNER_TOKEN, 60)
        assert again is not None, "\n".join(run.lines[-40:])
        assert again.group(1) == token.group(1)
        answer = requests.get(f"{run.base()}/organization", headers={"Authorization": f"Bearer {again.group(1)}"},
                              timeout=10)
        assert (answer.status_code, answer.json()["slug"]) == (200, "acme")
        assert not any("seeding" in line for line in run.lines)
        conn = db.connect(run.find(BANNER_DATABASE, 1).group(1))
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT (SELECT count(*) FROM organizations) AS organizations, "
                            "(SELECT count(*) FROM webhook_endpoints) AS endpoints, "
                            "(SELECT count(*) FROM tokens WHERE revoked_at IS NULL) AS tokens")
                assert cur.fetchone() == {"organizations": 2, "endpoints": 1, "tokens": 1}
        finally:
            conn.close()
        assert run.find(VERIFIED, 60) is not None, "\n".join(run.lines[-40:])
        pids = run.started()
        assert_nothing_left(run, pids, run.stop(signum), signum)
    finally:
        run.kill()


def test_a_port_in_use_is_named_before_anything_starts(checkout):
    with socket.create_server(("127.0.0.1", 0)) as taken:
        run = DemoRun(checkout, port=taken.getsockname()[1])
        try:
            assert run.process.wait(timeout=60) == 1
            run.reader.join(10)  # the output read to its end
        finally:
            run.kill()
    assert run.lines[-1] == f"port {run.port} is in use (another demo?): set PORT to another"
