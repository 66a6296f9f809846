"""`python3 dev.py demo` as a user runs it: a verified webhook and a moving change feed within minutes; SIGTERM,
SIGHUP or Ctrl-C to dev.py alone stops everything it started; a restart keeps the token and makes nothing twice.

The demo runs in a copy of the checkout (tests/support/demo_run.py), on free ports.
"""
import re
import signal
import socket

import psutil
import pytest
import requests

from models import db
from tests.support.demo_run import DemoRun, checkout_copy
from tests.support.processes import wait_for

pytestmark = pytest.mark.slow

BANNER_TOKEN = re.compile(r"^  Token +(sv_[A-Za-z0-9]{40}) ")
BANNER_DATABASE = re.compile(r"^  Database .* '(postgresql://[^']+)'$")
VERIFIED = re.compile(r"^receiver: (shipment\.[a-z_]+|alert\.created) (shp_\d+) (msg_\d+) signature verified")


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
    assert status == 128 + signum, "\n".join([*run.lines[-30:], "still running 10 s after the signal:",
                                              *still_running(pids)])
    assert [pid for pid in pids if running(pid)] == [], "\n".join(run.lines[-30:])
    assert port_free(run.port) and port_free(run.receiver_port)
    assert not (run.checkout / ".data" / "pg" / "postmaster.pid").exists()


def still_running(pids):
    """The command lines of the processes of `pids` that have not exited, to say which one held a stop up."""
    found = []
    for pid in pids:
        try:
            if running(pid):
                found.append(f"{pid} {' '.join(psutil.Process(pid).cmdline())}")
        except psutil.NoSuchProcess:
            pass
    return found


@pytest.fixture(scope="module")
def checkout():
    """A copy of the checkout without .data/, on the same .venv (tests/support/demo_run.py)."""
    with checkout_copy() as copy:
        yield copy


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
