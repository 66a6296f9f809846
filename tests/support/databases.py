"""The PostgreSQL server the tests use: one schema database per session, emptied between tests.

Copying a template database per test (`CREATE DATABASE ... TEMPLATE`) forces a checkpoint each
time, which would make setup most of the suite's time. Instead every test gets the same session
database with its tables emptied and its sequences restarted, in one round trip.
"""
import os
import uuid
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

import psycopg2
import psycopg2.errors

from models import db, migrations

# Database names carry the process id, so several test sessions (and xdist workers) share a server.
PREFIX = f"st_{os.getpid()}_{uuid.uuid4().hex[:6]}"


def with_database(url, name):
    """`url` pointing at database `name` of the same server."""
    return urlunsplit(urlsplit(url)._replace(path="/" + name))


def apply_schema(conn):
    """Apply schema.sql and record every migration as applied; safe to run on a database that has it."""
    migrations.apply_fresh_schema(conn)


def admin_connection(url):
    """An autocommit connection to the server's `postgres` database, for CREATE and DROP DATABASE."""
    conn = psycopg2.connect(with_database(url, "postgres"))
    conn.autocommit = True
    return conn


class Server:
    """Makes uniquely named databases on one server and drops them all at the end."""

    def __init__(self, url):
        self.url = url
        self.admin = admin_connection(url)
        self.names = []

    def create(self, label, template=None):
        """A new database (a copy of `template` when given); returns its URL."""
        name = f"{PREFIX}_{label}_{uuid.uuid4().hex[:6]}"
        copy = f' TEMPLATE "{template}"' if template else ""
        with self.admin.cursor() as cur:
            cur.execute(f'CREATE DATABASE "{name}"{copy}')
            # Tests never need a commit to survive a crash; not waiting for the WAL flush saves time.
            cur.execute(f'ALTER DATABASE "{name}" SET synchronous_commit = off')
        self.names.append(name)
        return with_database(self.url, name)

    def create_with_schema(self, label):
        """A new database holding schema.sql; returns (name, URL)."""
        url = self.create(label)
        conn = db.connect(url)
        try:
            apply_schema(conn)
            conn.commit()
        finally:
            conn.close()
        return urlsplit(url).path.lstrip("/"), url

    def drop(self, url):
        """Drop one database made here, even with connections still open."""
        name = urlsplit(url).path.lstrip("/")
        with self.admin.cursor() as cur:
            cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        self.names.remove(name)

    def close(self):
        """Drop every database made here."""
        with self.admin.cursor() as cur:
            for name in reversed(self.names):
                cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        self.names.clear()
        self.admin.close()


class Emptier:
    """Empties every table of a database and restarts its sequences, as if schema.sql were just applied."""

    # Dead rows pile up without autovacuum (the CI server runs without it); vacuum now and then.
    VACUUM_EVERY = 100

    def __init__(self, url):
        self.url = url
        self.conn = psycopg2.connect(url)
        self.conn.autocommit = True
        with self.conn.cursor() as cur:
            # schema_migrations describes the schema, not data: it stays.
            cur.execute("SELECT format('%I', tablename) FROM pg_tables WHERE schemaname = 'public' "
                        "AND tablename <> 'schema_migrations' ORDER BY 1")
            tables = [row[0] for row in cur.fetchall()]
            cur.execute("SELECT format('%I', sequencename) FROM pg_sequences WHERE schemaname = 'public'")
            sequences = [row[0] for row in cur.fetchall()]
        # DELETE with triggers and foreign keys off (replica role) rather than TRUNCATE, which makes new files
        # for every table and index however few rows they hold. setval is not transactional,
        # which is fine here.
        restart = f"SELECT {', '.join(f'setval({s!r}, 1, false)' for s in sequences)};" if sequences else ""
        self.statement = ("BEGIN; SET LOCAL session_replication_role = replica; "
                          + "".join(f"DELETE FROM {table}; " for table in tables) + restart + " COMMIT;")
        self.truncate = f"TRUNCATE {', '.join(tables)} RESTART IDENTITY CASCADE"
        # VACUUM records every emptied table as holding no rows, and the planner believes it: a later test
        # that fills a table with hundreds of rows then gets plans made for none (nested loops over seq scans,
        # a hundred times slower). A table of a fresh schema has never been vacuumed (reltuples -1), and the
        # planner sizes it by its pages instead; this puts the tables back in that state.
        self.forget_sizes = ("UPDATE pg_class SET reltuples = -1, relpages = 0 "
                             "WHERE relnamespace = 'public'::regnamespace AND relkind IN ('r', 'i', 'm', 'p')")
        self.count = 0

    def empty(self):
        """Remove every row; another session's open transaction is ended rather than waited for."""
        self.count += 1
        with self.conn.cursor() as cur:
            cur.execute("SET lock_timeout = '3s'")
            try:
                cur.execute(self.statement)
            except psycopg2.errors.LockNotAvailable:
                cur.execute("ROLLBACK")
                self._end_other_sessions(cur)
                cur.execute(self.statement)
            except psycopg2.errors.InsufficientPrivilege:
                # Not a superuser: the slower but unprivileged way.
                cur.execute("ROLLBACK")
                cur.execute(self.truncate)
            if self.count % self.VACUUM_EVERY == 0:
                cur.execute("VACUUM")
                cur.execute(self.forget_sizes)

    def _end_other_sessions(self, cur):
        cur.execute("""SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                        WHERE datname = current_database() AND pid <> pg_backend_pid()""")

    def close(self):
        """Close the connection."""
        self.conn.close()


# The one token the tests add to the demo data (the seed itself makes none).
DEMO_TOKEN_NAME = "test suite"


@dataclass(frozen=True)
class Demo:
    """The seeded demo: its database, an app on it, and request headers with a token of acme's owner."""

    url: str
    app: object
    headers: dict
