"""The API through database outages: dropped connections, a database away at start-up and for a while.

Never a 500: a pooled connection the server dropped is replaced before use (or its request's first
statements are retried once on a new one), a database that cannot be reached is 503 with
Retry-After, and /openapi.json and /docs are served without it.
"""
import logging
import os
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
from psycopg2.extensions import parse_dsn

from models import db, pool, principals
from tests.support import ROOT
from tests.support.factories import auth, make_org, make_token
from tests.support.outages import assert_unavailable
from tests.support.processes import free_port, gunicorn, wait_for
from tests.support.tcp_proxy import TcpProxy

PUBLIC_PATHS = ("/openapi.json", "/docs", "/docs/swagger-ui.css", "/docs/docs-init.js")


@pytest.fixture
def outage_database(module_database):
    """A database of this test alone (so terminating its sessions touches nothing else): (conn, app, token)."""
    with module_database() as (conn, app):
        make_org(conn, "acme")
        yield conn, app, make_token(conn, 1)


def other_sessions(conn):
    """Sessions on conn's database other than conn's own and the API's listening one (which comes back by itself)."""
    with conn.cursor() as cur:
        cur.execute("SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() "
                    "AND pid <> pg_backend_pid() AND application_name <> %s", (principals.APPLICATION_NAME,))
        return cur.fetchone()["n"]


def terminate_every_session(conn):
    """pg_terminate_backend every other session of conn's database; returns how many, once they are gone."""
    with conn.cursor() as cur:
        cur.execute("SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) AS n FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()")
        terminated = cur.fetchone()["n"]
    assert wait_for(lambda: other_sessions(conn) == 0, 10)
    return terminated


def unreachable_url():
    """A database URL on a closed port of 127.0.0.1."""
    return f"postgresql://shiptrack@127.0.0.1:{free_port()}/shiptrack"


def test_terminated_pooled_connections_are_replaced_before_use(outage_database):
    conn, app, token = outage_database
    client = app.test_client()
    assert client.get("/shipments", headers=auth(token)).status_code == 200
    assert terminate_every_session(conn) >= 1  # the pool's idle connection
    statuses = [client.get("/shipments", headers=auth(token)).status_code for _ in range(30)]
    assert statuses == [200] * 30


def test_a_connection_that_dies_after_the_check_is_retried_once(outage_database, monkeypatch, caplog):
    # The socket check cannot see a connection lost between the check and the first statement;
    # without the check every terminated connection reaches the first statement.
    caplog.set_level(logging.INFO, logger="api.context")
    conn, app, token = outage_database
    client = app.test_client()
    assert client.get("/shipments", headers=auth(token)).status_code == 200
    monkeypatch.setattr(pool, "looks_alive", lambda connection: not connection.closed)
    assert terminate_every_session(conn) >= 1
    statuses = [client.get("/shipments", headers=auth(token)).status_code for _ in range(10)]
    assert statuses == [200] * 10
    assert "retrying once on a new one" in caplog.text


def test_the_database_away_is_503_except_the_description_and_its_page():
    from app import create_app

    # create_app needs no database: the service starts while it is away.
    app = create_app({"TESTING": True, "DATABASE_URL": unreachable_url()})
    client = app.test_client()
    token = "sv_" + "a" * 40
    for path, headers in (("/shipments", auth(token)), ("/shipments", {}), ("/organization", auth(token)),
                          ("/shipments/shp_1.json", auth(token)), ("/no-such-route", {})):
        assert_unavailable(client.get(path, headers=headers))
    for path in PUBLIC_PATHS:
        with client.get(path) as response:
            assert response.status_code == 200, path
            # Served uncounted while the database is away (docs/authentication.md, "Rate limits").
            assert "RateLimit" not in response.headers
    assert client.get("/openapi.json").get_json()["openapi"] == "3.1.0"
    db.close_pool()


@pytest.mark.parametrize("command", [["db", "init"], ["tokens", "list", "--org", "acme"], ["webhooks", "list", "--org", "acme"]])
def test_a_command_with_a_wrong_url_says_so_in_one_line(command):
    for url in (unreachable_url(), "not a database url"):
        result = subprocess.run([sys.executable, "-m", "flask", "--app", "app", *command], cwd=ROOT,
                                env={**os.environ, "DATABASE_URL": url}, capture_output=True, text=True,
                                timeout=60)
        assert result.returncode == 1, result.stderr
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error: cannot connect to the database: "), result.stderr
        assert result.stdout == ""


def get_all(base, path, headers, count, threads=4):
    """`count` GETs of `path` from `threads` clients at once; their status codes."""
    def one(_):
        return requests.get(base + path, headers=headers, timeout=30).status_code
    with ThreadPoolExecutor(threads) as executor:
        return list(executor.map(one, range(count)))


@pytest.mark.slow
def test_gunicorn_workers_replace_terminated_connections(outage_database, tmp_path):
    conn, app, token = outage_database
    with gunicorn(app.config["DATABASE_URL"], tmp_path, workers=2,
                  RATE_LIMITS={"window_seconds": 300, "per_token": 100000, "per_ip": 100000,
                               "anonymous_per_ip": 100000}) as base:
        # Both workers hold a pooled connection.
        assert wait_for(lambda: set(get_all(base, "/shipments", auth(token), 8)) == {200}
                        and other_sessions(conn) >= 2, 20)
        for _round in range(3):
            assert terminate_every_session(conn) >= 1
            statuses = get_all(base, "/shipments", auth(token), 60)
            assert statuses.count(200) == 60, statuses


@pytest.mark.slow
def test_gunicorn_through_an_outage_and_back(outage_database, tmp_path):
    conn, app, token = outage_database
    target = parse_dsn(app.config["DATABASE_URL"])
    proxy = TcpProxy((target.get("host") or "127.0.0.1", int(target.get("port") or 5432)))
    url = proxy.url(app.config["DATABASE_URL"])
    seen = []
    try:
        # The database is away when the service starts.
        with gunicorn(url, tmp_path, workers=2,
                      RATE_LIMITS={"window_seconds": 300, "per_token": 100000, "per_ip": 100000,
                                   "anonymous_per_ip": 100000}) as base:
            def get(path, headers=None):
                response = requests.get(base + path, headers=headers or {}, timeout=30)
                seen.append(response.status_code)
                return response

            assert_unavailable(get("/shipments", auth(token)))
            for path in PUBLIC_PATHS:
                assert get(path).status_code == 200, path
            proxy.start()
            assert wait_for(lambda: get("/shipments", auth(token)).status_code == 200, 20)

            # An outage under load: pollers keep asking while the database goes away and comes back.
            polling = threading.Event()
            load = []

            def poll():
                while not polling.is_set():
                    load.append(requests.get(base + "/shipments", headers=auth(token), timeout=30).status_code)
            pollers = [threading.Thread(target=poll) for _ in range(3)]
            for thread in pollers:
                thread.start()
            assert wait_for(lambda: load.count(200) >= 20, 20)
            proxy.stop()
            assert wait_for(lambda: load.count(503) >= 20, 20)
            assert_unavailable(get("/shipments", auth(token)))
            assert get("/openapi.json").status_code == 200
            proxy.start()
            assert wait_for(lambda: load[-20:] == [200] * 20, 20)
            polling.set()
            for thread in pollers:
                thread.join(30)
            seen.extend(load)
            assert set(get_all(base, "/shipments", auth(token), 40)) == {200}
            log = (tmp_path / "gunicorn.log").read_text()
    finally:
        proxy.stop()
    assert set(seen) == {200, 503}, sorted(set(seen))
    assert "Traceback" not in log, log
