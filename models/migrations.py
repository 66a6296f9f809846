"""Numbered migrations: how a database made by an older version becomes the current schema.

`schema.sql` is the whole current schema, what `flask db init` applies to a new database.
`migrations/NNNN_name.sql` are the steps from the first numbered schema (0001, the schema.sql of
before migrations) to it, applied in order, each once, and recorded in `schema_migrations`.
A change to the schema is written twice: in schema.sql and as the next migration;
tests/database/test_migrations.py proves that both roads give the same schema (pg_dump --schema-only) and
that upgrading a database holding data loses none of it.
"""
import re
from dataclasses import dataclass
from pathlib import Path

import psycopg2.errors

from models.db import PROJECT_DIR, SCHEMA_PATH, execute, execute_all, execute_one

MIGRATIONS_DIR = PROJECT_DIR / "migrations"
_FILE_NAME = re.compile(r"([0-9]{4})_([a-z0-9_]+)\.sql")
# Any constant will do: only concurrent `db init` / `db upgrade` runs must agree on it.
_LOCK_KEY = 7_420_183_305

# The history of applied migrations; made by the first init or upgrade.
HISTORY_SQL = """
CREATE TABLE IF NOT EXISTS schema_migrations (
  version    integer PRIMARY KEY CHECK (version >= 1),
  name       text NOT NULL,
  applied_at timestamptz NOT NULL DEFAULT now()
)"""
# Whether the history table exists (a database made before numbered migrations has none).
_HAS_HISTORY_SQL = "SELECT to_regclass('schema_migrations') IS NOT NULL AS present"
# The migrations recorded as applied.
_APPLIED_SQL = "SELECT version FROM schema_migrations ORDER BY version"
# Whether the database has no schema at all (no organizations table).
_IS_EMPTY_SQL = "SELECT to_regclass('organizations') IS NULL AS empty"
# One migration recorded as applied; schema.sql records them all, again harmlessly.
_RECORD_SQL = "INSERT INTO schema_migrations (version, name) VALUES (%(version)s, %(name)s) ON CONFLICT DO NOTHING"
# One migration recorded as applied by upgrade, which holds the lock: recording it twice is a bug.
_RECORD_UPGRADE_SQL = "INSERT INTO schema_migrations (version, name) VALUES (%(version)s, %(name)s)"
# The notices of IF NOT EXISTS and friends are not news to whoever runs init or upgrade. LOCAL: in the
# caller's transaction alone, never left on a server session a transaction pooler gives to others.
_QUIET_SQL = "SET LOCAL client_min_messages = warning"
# One init or upgrade at a time, until the caller's transaction ends.
_LOCK_SQL = "SELECT pg_advisory_xact_lock(%(key)s)"


class SchemaMismatch(Exception):
    """The database's schema is not one this code can use or upgrade (the message says why, in one line)."""


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    path: Path

    def sql(self):
        return self.path.read_text()


def available(directory=MIGRATIONS_DIR):
    """The migrations shipped with this code, in order; numbered 1, 2, 3... without gaps."""
    found = []
    for path in sorted(directory.glob("*.sql")):
        match = _FILE_NAME.fullmatch(path.name)
        if match is None:
            raise SchemaMismatch(f"{path.name}: migration files are named NNNN_lowercase_name.sql")
        found.append(Migration(int(match.group(1)), match.group(2), path))
    if [migration.version for migration in found] != list(range(1, len(found) + 1)):
        raise SchemaMismatch(f"migrations in {directory} are not numbered 1 to {len(found)} without gaps")
    return found


def applied_versions(conn):
    """Versions recorded in schema_migrations (empty when the table does not exist)."""
    if not execute_one(conn, _HAS_HISTORY_SQL)["present"]:
        return []
    return [row["version"] for row in execute_all(conn, _APPLIED_SQL)]


def _is_empty(conn):
    return execute_one(conn, _IS_EMPTY_SQL)["empty"]


def _record(conn, migrations):
    execute(conn, HISTORY_SQL)
    for migration in migrations:
        execute(conn, _RECORD_SQL, {"version": migration.version, "name": migration.name})


def _lock(conn):
    execute(conn, _QUIET_SQL)
    execute(conn, _LOCK_SQL, {"key": _LOCK_KEY})


def apply_fresh_schema(conn):
    """schema.sql, recorded as every migration applied (it is their sum); harmless to repeat."""
    execute(conn, _QUIET_SQL)
    execute(conn, SCHEMA_PATH.read_text())
    _record(conn, available())


def upgrade(conn):
    """Apply the migrations the database has not had, in the caller's transaction; returns them.

    A database without history that holds tables predates numbered migrations: migration 1 (the
    last schema.sql of that time, written to bring any earlier one up to date) is applied first.
    """
    _lock(conn)
    migrations = available()
    done = set(applied_versions(conn))
    newest = max(done, default=0)
    if newest > len(migrations):
        raise SchemaMismatch(f"the database is at schema version {newest}, newer than this code knows "
                             f"({len(migrations)}): run the newer code, or restore a backup")
    pending = [migration for migration in migrations if migration.version not in done]
    execute(conn, HISTORY_SQL)
    for migration in pending:
        try:
            execute(conn, migration.sql())
        except psycopg2.errors.RaiseException as error:
            # A migration that checks the rows it is about to constrain names those it refuses (RAISE).
            refusal = f"{error.diag.message_primary}. {error.diag.message_hint or ''}".rstrip()
            raise SchemaMismatch(f"{migration.version:04d}_{migration.name} was not applied: {refusal}") from None
        execute(conn, _RECORD_UPGRADE_SQL, {"version": migration.version, "name": migration.name})
    return pending


def init(conn):
    """A new database gets schema.sql; one that already has a schema is upgraded. Returns what was done."""
    _lock(conn)
    if _is_empty(conn) and not applied_versions(conn):
        apply_fresh_schema(conn)
        return "created the schema (version %d)" % len(available())
    pending = upgrade(conn)
    return describe(pending)


def describe(pending):
    """One line saying what an upgrade did."""
    if not pending:
        return f"the schema is up to date (version {len(available())})"
    return "applied " + ", ".join(f"{migration.version:04d}_{migration.name}" for migration in pending)


def require_current(conn):
    """Raise SchemaMismatch unless the database has every migration this code has and no newer one."""
    done = applied_versions(conn)
    problem = version_problem(len(done), max(done, default=0))
    if problem is not None:
        raise SchemaMismatch(problem)


def version_problem(applied, newest):
    """Why a database with `applied` migrations, the newest numbered `newest`, does not fit this code; None if it does."""
    known = len(available())
    if newest > known:
        return f"the database is at schema version {newest}, newer than this code knows ({known})"
    if applied < known:
        return (f"the database is at schema version {newest} and this code needs {known}: "
                f"run `flask --app app db upgrade`")
    return None
