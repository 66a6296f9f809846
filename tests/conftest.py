"""Test databases: one template built from schema.sql per session, a fresh copy per test.

Tests run against a real PostgreSQL: $DATABASE_URL's server when set, else the embedded one.
Database names carry the process id, so several test sessions can share one server.
"""
import os
import uuid
from urllib.parse import urlsplit, urlunsplit

import psycopg2
import pytest

from models import db

_PREFIX = f"st_{os.getpid()}_{uuid.uuid4().hex[:6]}"


def _server_url():
    return os.environ.get("DATABASE_URL") or db.embedded_database_url()


def _with_database(url, name):
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + name))


def _admin(url):
    conn = psycopg2.connect(_with_database(url, "postgres"))
    conn.autocommit = True
    return conn


@pytest.fixture(scope="session")
def server_url():
    """URL of the PostgreSQL server the tests use."""
    return _server_url()


@pytest.fixture(scope="session")
def template_database(server_url):
    """A database holding schema.sql, copied for each test."""
    name = f"{_PREFIX}_template"
    admin = _admin(server_url)
    with admin.cursor() as cur:
        cur.execute(f'DROP DATABASE IF EXISTS "{name}"')
        cur.execute(f'CREATE DATABASE "{name}"')
    conn = db.connect(_with_database(server_url, name))
    db.apply_schema(conn)
    conn.commit()
    conn.close()
    yield name
    with admin.cursor() as cur:
        cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    admin.close()


@pytest.fixture
def database_url(server_url, template_database):
    """URL of a fresh database with the schema, dropped after the test."""
    name = f"{_PREFIX}_{uuid.uuid4().hex[:8]}"
    admin = _admin(server_url)
    with admin.cursor() as cur:
        cur.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template_database}" STRATEGY FILE_COPY')
    yield _with_database(server_url, name)
    db.close_pool()
    with admin.cursor() as cur:
        cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    admin.close()


@pytest.fixture
def conn(database_url):
    """An autocommit connection to the test database, for arranging data."""
    connection = db.connect(database_url)
    connection.autocommit = True
    yield connection
    connection.close()


@pytest.fixture
def app(database_url, tmp_path):
    """The application on the test database; STATEMENT_RECORDER collects per-request statement counts."""
    from app import create_app

    return create_app({"TESTING": True, "DATABASE_URL": database_url, "STATEMENT_RECORDER": [],
                       "STORAGE_DIR": str(tmp_path / "storage")})


@pytest.fixture
def client(app):
    """A test client for the application."""
    return app.test_client()
