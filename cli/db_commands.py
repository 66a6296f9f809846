"""`flask db init | upgrade | status`: the schema and its numbered migrations (models/migrations.py); `flask db
psql`: psql on the same database."""
import os
import subprocess
import sys

import click
from flask import current_app
from flask.cli import AppGroup

from cli.common import transaction
from cli.secrets import key_notice
from models import migrations
from models.embedded import psql_command

db_cli = AppGroup("db", help="Database schema.")


def _run(step):
    """Run `step(conn)` in one transaction; a schema that cannot be used is a one-line error (and a database
    that cannot be reached, as for every command: cli.common.transaction)."""
    try:
        with transaction() as conn:
            return step(conn)
    except migrations.SchemaMismatch as error:
        raise click.ClickException(str(error)) from None


@db_cli.command("init")
def init():
    """Create the schema in a new database; upgrade one that has it. Safe to run again."""
    click.echo(_run(migrations.init))
    _echo_notice(key_notice())


@db_cli.command("upgrade")
def upgrade():
    """Apply the numbered migrations this database has not had, in order, in one transaction."""
    click.echo(_run(lambda conn: migrations.describe(migrations.upgrade(conn))))
    _echo_notice(key_notice())


@db_cli.command("status")
def status():
    """The schema version of the database and of this code; exits 1 unless they are equal."""
    def check(conn):
        done = migrations.applied_versions(conn)
        migrations.require_current(conn)
        return f"schema version {max(done, default=0)}, as this code needs", key_notice(conn)
    line, notice = _run(check)
    click.echo(line)
    _echo_notice(notice)


@db_cli.command("psql", context_settings={"ignore_unknown_options": True, "help_option_names": []})
@click.argument("arguments", nargs=-1, type=click.UNPROCESSED)
def psql(arguments):
    """Run psql on this database with ARGUMENTS (`-1 -f block.sql`); the embedded server stays up meanwhile."""
    command, environment = psql_command(current_app.config["DATABASE_URL"])
    sys.exit(subprocess.run([*command, *arguments], env={**os.environ, **environment}).returncode)


def _echo_notice(notice):
    """The secret key's line under a schema command's own (no key set, secrets left plain: docs/secret-key.md)."""
    if notice:
        click.echo(notice)
