"""A database that accepts connections and never answers (a TCP proxy switched to hanging) costs seconds in
total, not seconds per request: once a deadline has passed, the breaker (models/breaker.py) answers 503 at
once while one request at a time finds out whether the database is back; the description, its page and
/healthz never wait on it; service comes back within seconds of the database. The CLI gives up in one line.
"""
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import psycopg2
import pytest
import requests

from models import breaker, db
from tests.support import ROOT
from tests.support.apps import NO_RATE_LIMITS
from tests.support.factories import auth, make_org, make_token
from tests.support.outages import assert_unavailable, client_deadline, proxy_to, timed
from tests.support.pgbouncer import PgBouncer
from tests.support.processes import gunicorn, wait_for

PUBLIC = ("/openapi.json", "/docs", "/healthz")
NOT_READY = {"error": {"type": "api_error", "code": "service_unavailable",
                       "message": "Not ready: the service cannot reach its database. Retry after the number of "
                                  "seconds in Retry-After (5).", "param": None}}


@pytest.fixture
def proxy(database_url):
    """A TCP proxy to the test server, forwarding."""
    made = proxy_to(database_url).start()
    yield made
    made.stop()


def get(base, path, headers=None):
    """(seconds, response) of one GET."""
    return timed(requests.get, base + path, headers=headers or {}, timeout=60)


def assert_public_answers_at_once(base):
    for path in PUBLIC:
        seconds, response = get(base, path)
        assert response.status_code == 200, (path, response.text[:200])
        assert "RateLimit" not in response.headers, path  # uncounted: the count would wait on the database
        assert seconds < 1.5, (path, seconds)


@pytest.mark.slow
def test_gunicorn_against_a_hung_database(conn, proxy, tmp_path):
    token = make_token(conn, make_org(conn))
    with gunicorn(proxy.url(conn.dsn), tmp_path, workers=2, RATE_LIMITS=NO_RATE_LIMITS) as base:
        assert get(base, "/organization", auth(token))[1].status_code == 200
        proxy.hang()
        assert_public_answers_at_once(base)  # before any deadline passed as after

        # A page needs the database (GET /organization does not: a worker that keeps the principal answers it).
        started = time.monotonic()
        with ThreadPoolExecutor(8) as clients:
            answers = list(clients.map(lambda _: get(base, "/shipments", auth(token))[1], range(40)))
        total = time.monotonic() - started
        for response in answers:
            assert_unavailable(response)
            assert response.headers["Content-Type"] == "application/json"
        assert total < 20, total  # 160 s when each request waited out the 8 s deadline

        assert_public_answers_at_once(base)
        seconds, ready = get(base, "/readyz")
        assert (ready.status_code, ready.json(), ready.headers["Retry-After"]) == (503, NOT_READY, "5")
        assert seconds < 3, seconds

        proxy.forward()
        back = time.monotonic()
        assert wait_for(lambda: get(base, "/shipments", auth(token))[1].status_code == 200, 12)
        assert time.monotonic() - back < 12
        assert wait_for(lambda: get(base, "/readyz")[1].status_code == 200, 12)
    log = (tmp_path / "gunicorn.log").read_text()
    assert "WORKER TIMEOUT" not in log and "Traceback" not in log, log


def test_one_probe_at_a_time_and_the_breaker_closes_when_the_database_answers(database_url, proxy, monkeypatch):
    monkeypatch.setattr(breaker, "PROBE_EVERY_SECONDS", 0.4)
    target = db.Target(proxy.url(database_url), "breaker-test", connect_timeout=2)
    db.checkin(db.checkout(target))  # a pooled connection, made while forwarding
    with client_deadline(1):
        proxy.hang()
        conn = db.checkout(target)
        with pytest.raises(db.DatabaseTimeout), conn.cursor() as cur:
            cur.execute("SELECT 1")
        db.checkin(conn)
        assert breaker.is_open()

        # 8 threads asking for 3 s: refused at once, but for one probe at a time, each within the connect timeout.
        probes, lock = [], threading.Lock()

        def ask():
            stop = time.monotonic() + 3
            while time.monotonic() < stop:
                started = time.monotonic()
                with pytest.raises(db.DatabaseUnavailable):
                    db.checkout(target)
                with lock:
                    probes.append((started, time.monotonic()))
                time.sleep(0.01)
        threads = [threading.Thread(target=ask) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        slow = sorted((start, end) for start, end in probes if end - start > 0.5)
        assert 1 <= len(slow) <= 3, slow
        assert all(end - start < 2.5 for start, end in slow), slow
        assert all(earlier[1] <= later[0] for earlier, later in zip(slow, slow[1:])), "probes overlapped"
        assert len(probes) - len(slow) > 100

        proxy.forward()
        assert wait_for(lambda: _answers(target), 5)
        assert not breaker.is_open()
    db.close_pool()


def _answers(target):
    try:
        conn = db.checkout(target)
    except db.DatabaseUnavailable:
        return False
    db.checkin(conn)
    return True


@pytest.mark.parametrize("command", [["db", "status"], ["tokens", "list", "--org", "acme"]])
def test_a_command_against_a_hung_database_says_so_in_one_line(database_url, proxy, command):
    proxy.hang()
    seconds, result = timed(subprocess.run, [sys.executable, "-m", "flask", "--app", "app", *command], cwd=ROOT,
                            env={**os.environ, "DATABASE_URL": proxy.url(database_url),
                                 "SHIPTRACK_CLI_CONNECT_TIMEOUT": "2"},
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: cannot connect to the database: "), result.stderr
    assert "timeout expired" in lines[0] and seconds < 20, (seconds, lines)


@pytest.mark.slow
def test_a_command_whose_statements_never_reach_the_database_gives_up_in_one_line(conn, database_url, server_url):
    """Through a pooler the connection is made; its statements wait for a server connection that never comes."""
    make_token(conn, make_org(conn, "acme"))
    bouncer = PgBouncer(server_url, "transaction", pool_size=1).start()
    url = bouncer.url(database_url)
    holder = psycopg2.connect(url)  # an open transaction holds the pooler's one server connection
    try:
        with holder.cursor() as cur:
            cur.execute("SELECT 1")
        seconds, result = timed(subprocess.run, [sys.executable, "-m", "flask", "--app", "app", "tokens", "list",
                                                 "--org", "acme"], cwd=ROOT, capture_output=True, text=True,
                                timeout=60, env={**os.environ, "DATABASE_URL": url,
                                                 "SHIPTRACK_DATABASE_POOLER": "transaction",
                                                 "SHIPTRACK_CLI_STATEMENT_TIMEOUT": "1"})
    finally:
        holder.rollback()
        holder.close()
        bouncer.close()
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert lines == ["Error: the database stopped answering (nothing was committed): the database did not answer "
                     "within 4 s (CLI_STATEMENT_TIMEOUT + 3 s)"], result.stderr
    assert seconds < 20, seconds


def test_a_forked_worker_starts_with_the_breaker_closed():
    """Per process: gunicorn forks its workers, and each finds out for itself."""
    breaker.opened("the test's outage", time.monotonic())
    try:
        pid = os.fork()
        if pid == 0:  # the child: exit at once, saying what it sees
            os._exit(1 if breaker.is_open() else 0)
        assert os.waitpid(pid, 0)[1] == 0, "the child saw the parent's open breaker"
        assert breaker.is_open()
        with pytest.raises(db.DatabaseUnavailable, match="the test's outage"):
            db.checkout(db.Target("postgresql://127.0.0.1:1/none"))
    finally:
        breaker.probed(True)
