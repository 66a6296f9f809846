"""A database that accepts connections and never answers, and a statement blocked by a lock: a JSON 503 in
seconds (the connect and statement timeouts of config.py), never a gunicorn worker killed; the CLI and the
delivery script give up with one line."""
import os
import socket
import subprocess
import sys
import threading

import pytest
import requests

from tests.support import ROOT
from tests.support.apps import make_app
from tests.support.factories import auth, make_org, make_token
from tests.support.outages import assert_unavailable
from tests.support.pgbouncer import PgBouncer
from tests.support.processes import gunicorn


class Hang:
    """A TCP listener on 127.0.0.1 that accepts every connection and never says a word."""

    def __init__(self):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port, self.accepted, self.closed = self.sock.getsockname()[1], [], False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.closed:
            try:
                self.accepted.append(self.sock.accept()[0])
            except OSError:
                return

    def url(self):
        """A database URL pointing at it."""
        return f"postgresql://shiptrack@127.0.0.1:{self.port}/shiptrack"

    def close(self):
        """Stop listening and drop every connection it holds."""
        self.closed = True
        self.sock.close()
        for each in self.accepted:
            each.close()


@pytest.fixture
def hang():
    """A database that hangs."""
    made = Hang()
    yield made
    made.close()


@pytest.mark.slow
def test_gunicorn_answers_503_while_the_database_hangs_and_keeps_its_worker(hang, tmp_path):
    """The service starts while the database hangs; the first request is a 503 after the connect timeout, the
    next at once (the breaker is open: models/breaker.py)."""
    with gunicorn(hang.url(), tmp_path) as base:
        for path in ("/organization", "/shipments"):
            response = requests.get(base + path, headers=auth("sv_" + "a" * 40), timeout=25)
            assert_unavailable(response)
        assert requests.get(base + "/openapi.json", timeout=25).status_code == 200
    log = (tmp_path / "gunicorn.log").read_text()
    assert "WORKER TIMEOUT" not in log and log.count("Booting worker") == 1, log
    assert len(hang.accepted) >= 1, "the service did try the database"


@pytest.fixture(params=[None, "transaction"])
def api_url(request, server_url, database_url):
    """(URL, pooler) of the test database: direct, and through PgBouncer in transaction mode."""
    if request.param is None:
        yield database_url, None
        return
    bouncer = PgBouncer(server_url, request.param).start()
    yield bouncer.url(database_url), request.param
    bouncer.close()


def test_a_statement_blocked_by_a_lock_is_a_503(conn, api_url):
    """Through a transaction pooler too: the timeout is SET LOCAL in each transaction there."""
    make_org(conn, "acme")
    token = make_token(conn, 1)
    url, pooler = api_url
    app = make_app(url, DATABASE_STATEMENT_TIMEOUT=1, DATABASE_POOLER=pooler)
    client = app.test_client()
    assert client.get("/shipments", headers=auth(token)).status_code == 200
    conn.autocommit = False
    with conn.cursor() as cur:
        cur.execute("LOCK TABLE shipments IN ACCESS EXCLUSIVE MODE")
    try:
        assert_unavailable(client.get("/shipments", headers=auth(token)))
    finally:
        conn.rollback()
        conn.autocommit = True
    assert client.get("/organization", headers=auth(token)).status_code == 200


@pytest.mark.parametrize("command, setting", [
    (["-m", "flask", "--app", "app", "db", "status"], "CLI_CONNECT_TIMEOUT"),
    (["-m", "delivery", "--seconds", "1"], "DELIVERY_CONNECT_TIMEOUT"),
])
def test_the_cli_and_the_delivery_script_give_up_on_a_hanging_database(hang, command, setting):
    result = subprocess.run([sys.executable, *command], cwd=ROOT, capture_output=True, text=True, timeout=60,
                            env={**os.environ, "DATABASE_URL": hang.url(), f"SHIPTRACK_{setting}": "2"})
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "timeout expired" in lines[0], result.stderr
