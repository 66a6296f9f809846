"""Fixtures every folder uses: databases on a real PostgreSQL, the application, the demo data, the HTTPS receiver.

Tests run against $DATABASE_URL's server when set, else the embedded one. Each session makes one
database from schema.sql; every test that asks for a database gets it emptied (tests/support/
databases.py). Modules whose many read-only tests share one filling use `module_database`; the demo
data is seeded once per session (`demo_database`). A fixture only one folder uses is in that folder's
conftest.py.
"""
import os
import ssl
import threading
from contextlib import contextmanager
from datetime import datetime, timezone

import pytest
import trustme

from delivery.outbox import render_pending
from models import db, organizations, tokens
from tests.support.apps import NO_RATE_LIMITS, make_app
from tests.support.databases import DEMO_TOKEN_NAME, Demo, Emptier, Server
from tests.support.webhooks import RECEIVER_HOST, Receiver


@pytest.fixture(scope="session")
def server():
    """The PostgreSQL server; every database made on it is dropped when the session ends."""
    made = Server(os.environ.get("DATABASE_URL") or db.embedded_database_url())
    yield made
    db.close_pool()
    made.close()


@pytest.fixture(scope="session")
def template_database(server):
    """Name of a database holding schema.sql and nothing else, to copy (`CREATE DATABASE ... TEMPLATE`)."""
    name, _url = server.create_with_schema("template")
    return name


@pytest.fixture(scope="session")
def _session_database(server):
    """The database every function-scoped test shares, with what empties it."""
    _name, url = server.create_with_schema("tests")
    emptier = Emptier(url)
    yield url, emptier
    emptier.close()


@pytest.fixture
def database_url(_session_database):
    """URL of a database holding schema.sql and no rows (sequences restarted)."""
    url, emptier = _session_database
    emptier.empty()
    yield url
    db.close_pool()


@pytest.fixture
def conn(database_url):
    """An autocommit connection to the test database, for arranging data."""
    connection = db.connect(database_url)
    connection.autocommit = True
    yield connection
    connection.close()


@pytest.fixture
def app(database_url, tmp_path):
    """The application on the test database."""
    return make_app(database_url, STORAGE_DIR=str(tmp_path / "storage"))


@pytest.fixture
def client(app):
    """A test client for the application."""
    return app.test_client()


@pytest.fixture(scope="session")
def module_database(server, template_database):
    """A context manager giving a module its own database: yields (autocommit connection, app without limits)."""

    @contextmanager
    def make(**config):
        url = server.create("m", template=template_database)
        conn = db.connect(url)
        conn.autocommit = True
        try:
            yield conn, make_app(url, RATE_LIMITS=NO_RATE_LIMITS, **config)
        finally:
            conn.close()
            db.close_pool()
            server.drop(url)

    return make


@pytest.fixture(scope="session")
def demo_database(module_database, tmp_path_factory):
    """The demo data (`demo seed --shipments 300`), seeded once per session. Tests must not change it."""
    storage = str(tmp_path_factory.mktemp("demo") / "storage")
    with module_database(STORAGE_DIR=storage) as (conn, app):
        result = app.test_cli_runner().invoke(args=["demo", "seed", "--shipments", "300"])
        assert result.exit_code == 0, result.output
        # What the delivery script does first in a deployment: render the seed's events, so that
        # GET /events has a history to show (no endpoint exists, so nothing is fanned out).
        conn.autocommit = False
        render_pending(conn, datetime.now(timezone.utc))
        conn.commit()
        conn.autocommit = True
        acme = organizations.get_organization_by_slug(conn, "acme")["id"]
        member = organizations.get_membership(conn, acme, "owner@acme.example")
        value, _row = tokens.create_token(conn, acme, member["user_id"], DEMO_TOKEN_NAME, "never")
        yield Demo(app.config["DATABASE_URL"], app, {"Authorization": f"Bearer {value}"})


@pytest.fixture(scope="session")
def ca():
    """A certificate authority made for the tests."""
    return trustme.CA()


@pytest.fixture(scope="session")
def ca_bundle(ca, tmp_path_factory):
    """The CA certificate as a PEM file (the WEBHOOK_CA_BUNDLE setting)."""
    path = tmp_path_factory.mktemp("ca") / "ca.pem"
    ca.cert_pem.write_to_path(str(path))
    return str(path)


@pytest.fixture
def receiver(ca):
    """A running HTTPS receiver on 127.0.0.1 with a certificate for receiver.test and 127.0.0.1."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(RECEIVER_HOST, "127.0.0.1").configure_cert(context)
    server = Receiver(context)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
