"""Databases brought to a chosen migration, each step committed on a connection of its own."""
from models import db, migrations


def run_in_transaction(url, step):
    """`step(conn)` on a new connection to `url`, committed; its result."""
    conn = db.connect(url)
    try:
        result = step(conn)
        conn.commit()
        return result
    finally:
        conn.close()


def apply_first_migration(conn):
    """What a database made before numbered migrations looks like: the baseline, recorded as version 1."""
    first = migrations.available()[0]
    with conn.cursor() as cur:
        cur.execute("SET client_min_messages = warning")
        cur.execute(first.sql())
        cur.execute(migrations.HISTORY_SQL)
        cur.execute("INSERT INTO schema_migrations (version, name) VALUES (1, %s)", (first.name,))


def apply_migrations_through(version):
    """A step bringing a database at migration 1 to `version`, as `db upgrade` did when that was the newest."""
    def step(conn):
        with conn.cursor() as cur:
            for migration in migrations.available()[1:version]:
                cur.execute(migration.sql())
                cur.execute("INSERT INTO schema_migrations (version, name) VALUES (%s, %s)",
                            (migration.version, migration.name))
    return step
